"""The sweep's search, memory budget, order, curve summary and dtype support (no MXNet)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_mxperf.config import parsers
from pytest_mxperf.measuring import dtype_support, sweep_memory, sweep_search
from pytest_mxperf.measuring.sweep_memory import MemoryBudget
from pytest_mxperf.measuring.sweep_search import Curve, Plan, Point, run_curve

MIB = 2**20


def fake_points(
    rate: Callable[[int], float], oom_from: int | None = None, mib_per_item: int = 0
) -> tuple[Callable[[int], Point], list[int]]:
    """A measure_point whose img/s is ``rate(batch)``; OOM from ``oom_from``; peak memory
    100 MiB + ``mib_per_item`` MiB per item. Also returns the batches it was asked for."""
    asked: list[int] = []

    def measure(batch: int) -> Point:
        asked.append(batch)
        if oom_from is not None and batch >= oom_from:
            return Point(batch, "oom", note="out of memory")
        return Point(batch, "ok", rate(batch), 0.01, (100 + mib_per_item * batch) * MIB)

    return measure, asked


def saturating(batch: int) -> float:
    return 1000.0 * batch / (batch + 4)


def test_auto_doubles_until_oom_then_bisects() -> None:
    measure, asked = fake_points(saturating, oom_from=100)
    curve = run_curve("float32", Plan(None, resolution=0.0), measure)
    assert asked[:8] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert asked[8:] == [96, 112, 104, 100, 98, 99]  # bisection down to one batch
    assert curve.limit == "oom" and curve.largest_fit == 99
    assert curve.best is not None and curve.best.batch_size == 99
    # 1000*b/(b+4) is within 5% of the best from b=64 on (941 >= 0.95*960)
    assert curve.plateau == 64


def test_no_bisection_after_a_real_oom_where_a_second_may_crash() -> None:
    # MXNet on CPU: the doubling's first allocation failure ends the search at the last fit.
    measure, asked = fake_points(saturating, oom_from=100)
    curve = run_curve("float32", Plan(None), measure, bisect_after_oom=False)
    assert asked == [1, 2, 4, 8, 16, 32, 64, 128]
    assert curve.limit == "oom" and curve.largest_fit == 64
    assert curve.notes == [sweep_search.NO_BISECT_AFTER_OOM.format(last_fit=64, first_fail=128)]
    # A memory budget's refusals run nothing: they still bisect.
    measure, asked = fake_points(saturating, mib_per_item=1)
    budget = MemoryBudget(300 * MIB, start=100 * MIB)
    curve = run_curve("float32", Plan(None), measure, budget=budget, bisect_after_oom=False)
    assert curve.limit == "budget" and asked[-1] not in (1, 2, 4, 8, 16, 32, 64, 128)


def test_bisection_stops_at_the_resolution() -> None:
    measure, asked = fake_points(saturating, oom_from=100)
    run_curve("float32", Plan(None), measure)  # resolution 1/8 of the last fit
    assert asked[8:] == [96, 112, 104]


def test_auto_stops_at_max_batch() -> None:
    measure, asked = fake_points(saturating)
    curve = run_curve("float32", Plan(None, start=4, max_batch=32), measure)
    assert asked == [4, 8, 16, 32] and curve.limit == "max" and curve.largest_fit == 32


def test_explicit_sizes_run_powers_of_two_first() -> None:
    assert sweep_search.shape_first([48, 1, 8, 24, 2, 8, 64]) == [1, 2, 8, 64, 24, 48]
    measure, asked = fake_points(saturating)
    run_curve("float32", Plan((3, 1, 4, 2)), measure)
    assert asked == [1, 2, 4, 3]


def test_time_budget_cut_lists_what_was_not_measured() -> None:
    measure, asked = fake_points(saturating)
    budget = iter([True, True, True, False, False])
    curve = run_curve("float32", Plan(None, max_batch=64), measure, time_left=lambda: next(budget))
    assert asked == [1, 2, 4]
    assert curve.limit == "time" and curve.not_measured == [8]
    assert "16, 32, 64" in curve.notes[0]
    assert "not measured (time budget): 8" in curve.describe()

    explicit = iter([True, False, False, False])
    curve = run_curve("float32", Plan((1, 2, 3, 4)), measure, time_left=lambda: next(explicit))
    assert curve.not_measured == [2, 3, 4]


def test_memory_budget_predicts_and_never_runs_a_point_over_it() -> None:
    measure, asked = fake_points(saturating, mib_per_item=2)  # 100 MiB + 2 MiB per image
    budget = MemoryBudget(600 * MIB, start=90 * MIB)
    curve = run_curve("float32", Plan(None, resolution=0.0), measure, budget=budget)
    # 256 would need 612 MiB: refused by prediction, never measured
    assert 256 not in asked and max(asked) < 250
    assert curve.limit == "budget" and curve.largest_fit is not None
    assert all(100 + 2 * b <= 600 / sweep_memory.BUDGET_MARGIN for b in asked)
    refused = [p for p in curve.points if p.status == "budget"]
    assert refused and "exceeds the memory budget 600 MiB" in refused[0].note


def test_a_measured_point_over_the_budget_does_not_fit() -> None:
    # flat earlier points predict nothing; batch 4 then needs 500 MiB
    budget = MemoryBudget(250 * MIB, start=0, seen=[(1, 0), (2, 0)])
    curve = run_curve(
        "float32", Plan((4,)), fake_points(saturating, mib_per_item=100)[0], budget=budget
    )
    point = curve.points[0]
    assert point.over_budget and point.images_per_sec is not None and curve.largest_fit is None
    assert "peak 500 MiB exceeded the memory budget 250 MiB" in point.note


def test_a_budget_below_the_first_batch_is_a_clear_message() -> None:
    measure, asked = fake_points(saturating)
    budget = MemoryBudget(100 * MIB, start=300 * MIB)
    curve = run_curve("float32", Plan(None), measure, budget=budget)
    assert asked == [] and curve.largest_fit is None and curve.limit == "budget"
    text = curve.describe()
    assert text.startswith("float32: no batch size fits (batch 1: the memory budget 100 MiB")
    assert "300 MiB resident" in text


def test_an_error_ends_the_doubling() -> None:
    def measure(batch: int) -> Point:
        return Point(batch, "error" if batch >= 4 else "ok", None if batch >= 4 else 1.0)

    curve = run_curve("float32", Plan(None), measure)
    assert [p.batch_size for p in curve.points] == [1, 2, 4] and curve.limit == "error"


def test_summary_travels_with_the_points() -> None:
    curve = Curve("float32", [Point(1, "ok", 100.0), Point(2, "ok", 190.0), Point(4, "oom")])
    curve.limit = "oom"
    assert curve.summary() == {
        "dtype": "float32",
        "largest_fit": 2,
        "best": 2,
        "plateau": 2,
        "limit": "oom",
        "not_measured": [],
        "curve": {"1": 100.0, "2": 190.0},
    }


@pytest.mark.parametrize(
    ("text", "size"),
    [("2GiB", 2 * 2**30), ("512m", 512 * MIB), ("1.5GB", 3 * 2**29), ("4096", 4096)],
)
def test_parse_size(text: str, size: int) -> None:
    assert parsers.size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1G", "0"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parsers.size(text)


def test_make_plan_checks_its_arguments() -> None:
    assert sweep_search.make_plan("auto", 1, 64).batch_sizes is None
    assert sweep_search.make_plan([8, 1], 1, 64).batch_sizes == (8, 1)
    for bad in ("all", [], [0], [2.0]):
        with pytest.raises(ValueError, match="batch_sizes"):
            sweep_search.make_plan(bad, 1, 64)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="larger than max_batch"):
        sweep_search.make_plan("auto", 128, 64)


BF16 = frozenset({"avx512f", "avx512_bf16"})


@pytest.mark.parametrize(
    ("dtype", "kind", "mode", "flags", "features", "reason"),
    [
        ("float32", "cpu", "training", frozenset(), "", None),
        ("float16", "cpu", "inference", frozenset(), "", "no float16 GEMM on CPU"),
        ("float16", "gpu", "training", frozenset(), "CUDA", None),
        ("amp", "gpu", "inference", frozenset(), "CUDA", None),
        ("amp", "gpu", "training", frozenset(), "CUDA", "amp.init()"),
        ("amp", "cpu", "inference", BF16, "MKLDNN", "no float16 GEMM on CPU"),
        ("bfloat16", "cpu", "inference", BF16, "MKLDNN", None),
        ("bfloat16", "cpu", "inference", frozenset({"avx2"}), "MKLDNN", "avx512_bf16 or amx_bf16"),
        ("bfloat16", "cpu", "inference", BF16, "OPENMP", "MKLDNN feature off"),
        ("bfloat16", "gpu", "inference", BF16, "CUDA,MKLDNN", "CPU only"),
    ],
)
def test_unsupported_dtypes_have_reasons(
    dtype: str, kind: str, mode: str, flags: frozenset[str], features: str, reason: str | None
) -> None:
    found = dtype_support.unsupported_dtype(dtype, kind, mode, flags=flags, features=features)
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found


def test_largest_fit_drop() -> None:
    assert sweep_search.largest_fit_drop(32, {"largest_fit": 64, "limit": "oom"}) == (
        "the largest batch that fits dropped from 64 to 32 (stopped by oom before): the model "
        "now needs more memory per batch"
    )
    assert sweep_search.largest_fit_drop(64, {"largest_fit": 64}) is None
    assert sweep_search.largest_fit_drop(32, None) is None


def test_peak_meter_reads_a_peak() -> None:
    status = iter([{"VmRSS": 10}, {"VmRSS": 50, "VmHWM": 80}])
    meter = sweep_memory.PeakMeter(lambda: next(status))
    with meter.measuring():
        pass
    assert meter.before == 10 and meter.peak in (50, 80)  # 80 where VmHWM could be reset
