"""``mxperf.sweep`` end to end: each point a case, the curve in the report, unsupported dtypes
skipped with reasons, and a real CPU allocation failure ending the doubling (issue #15)."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

FAKE_SWEEP = """
import pytest
from pytest_mxperf.testing import FakeModel

def test_auto(mxperf):
    s = mxperf.sweep(lambda: FakeModel(images_per_sec=500.0, oom_from_batch=40),
                     model="toy", max_batch=256)
    curve = s.curves["float32"]
    # On CPU no bisection follows a real allocation failure (a second may crash MXNet).
    assert curve.limit == "oom" and curve.largest_fit == 32, s.lines()
    assert [r.batch_size for r in s.results] == [1, 2, 4, 8, 16, 32, 64]
    assert "not bisected between 32 and 64" in curve.notes[0]

def test_auto_gpu(mxperf, mxperf_backend):
    mxperf_backend.gpus = 1
    try:
        s = mxperf.sweep(lambda: FakeModel(images_per_sec=500.0, oom_from_batch=40),
                         model="toy", max_batch=256, ctx=mxperf_backend.context("gpu"))
    finally:
        mxperf_backend.gpus = 0
    curve = s.curves["float32"]
    assert curve.limit == "oom" and curve.largest_fit == 36, s.lines()  # 40-36 <= 36/8

def test_dtypes(mxperf):
    s = mxperf.sweep(FakeModel(images_per_sec=100.0), batch_sizes=[1, 2],
                     dtypes=["float32", "float16", "bfloat16"], model="grid")
    assert "no float16 GEMM on CPU" in s.curves["float16"].skipped
    assert s.curves["bfloat16"].skipped

def test_all_skipped(mxperf):
    mxperf.sweep(FakeModel(images_per_sec=100.0), batch_sizes=[1], dtypes=["float16"])
"""


def test_a_sweep_makes_a_case_per_point_and_a_curve(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(FAKE_SWEEP)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "r.json", "-rs")
    result.assert_outcomes(passed=3, skipped=1)
    cases: dict[str, Any] = {
        c["key"]: c for c in json.loads((fake_pytester.path / "r.json").read_text())["cases"]
    }
    oom = cases["toy/inference/float32/bs64/cpu"]
    assert oom["status"] == "oom" and oom["verdict"]["status"] == "oom"
    fit = cases["toy/inference/float32/bs32/cpu"]
    assert fit["status"] == "ok" and fit["sweep"]["largest_fit"] == 32
    assert cases["toy/inference/float32/bs36/gpu"]["sweep"]["largest_fit"] == 36
    assert fit["sweep"]["limit"] == "oom"
    assert "bs256" not in " ".join(cases)
    assert set(cases["grid/inference/float32/bs2/cpu"]["sweep"]["skipped"]) == {
        "float16",
        "bfloat16",
    }
    result.stdout.fnmatch_lines(
        [
            "*mxperf sweep: grid, infer, cpu*",
            "*batch*float32*float16*bfloat16*",
            "*float16: skipped (float16 on CPU*",
            "*mxperf sweep: toy, infer, cpu*",
            "*float32: largest batch that fits 32 (limit: oom)*",
            "float32: not bisected between 32 and 64: after a CPU allocation failure*",
            "float32: batch 64: *",
            "SKIPPED*float16 on CPU: MXNet 1.9 has no float16 GEMM on CPU*",
        ]
    )


#: Under an address-space limit (~0.6 GB over what MXNet holds once warm) a real sweep's
#: doubling ends in MXNet's CPU allocation failure; the next test still measures normally.
#: The swept network is elementwise only, so the failing allocation is an NDArray's: MXNet
#: 1.9.1 frees an operator's temporary workspace before growing it and keeps the stale pointer
#: when the new allocation fails, so a failure *there* (a convolution's workspace) makes a
#: later resize, or the process exit, free it twice and crash (seen here: SIGSEGV in
#: StorageImpl::DirectFree from ~ResourceTempSpace). The memory budget exists to stop first.
CPU_OOM_SWEEP = """
from oom_models import elementwise, net


def test_a_sweep(mxperf):
    s = mxperf.sweep(elementwise, start=1024, max_batch=1 << 20, input_shape=(3, 64, 64),
                     model="scale-64px")
    curve = s.curves["float32"]
    print("\\n".join(s.lines()))
    assert curve.limit == "oom", s.lines()
    assert curve.largest_fit is not None and curve.largest_fit >= 1024


def test_b_next_case(mxperf):
    r = mxperf.inference(net(), batch_size=1, input_shape=(3, 32, 32), model="mobilenet0.25-32px")
    assert r.status.value == "ok"
"""


def test_a_real_cpu_allocation_failure_ends_the_doubling(
    cpu_oom_run: Callable[..., tuple[pytest.RunResult, list[Any]]],
) -> None:
    # At most ~0.6 GB more than MXNet uses once warm (the cpu_oom_run fixture). The figures
    # are not checked: each point warms up for at most 0.3 s (the fixture's 1 s before).
    result, cases = cpu_oom_run(
        CPU_OOM_SWEEP,
        600_000_000,
        "--mxperf-memory-budget",
        "16GiB",
        "--mxperf-sweep-time",
        "200",
        "--mxperf-warmup-time",
        "0.3",
        timeout=400,
    )
    result.assert_outcomes(passed=2)
    ooms = [c for c in cases if c["status"] == "oom"]
    assert ooms and all("Failed to allocate CPU Memory" in c["error"] for c in ooms), [
        (c["batch_size"], c["error"]) for c in ooms
    ]
    fits = [c for c in cases if c.get("sweep") and c["status"] == "ok"]
    assert fits and fits[0]["sweep"]["limit"] == "oom"
    assert fits[0]["sweep"]["largest_fit"] == max(c["batch_size"] for c in fits)
    # One allocation failure only: a bisection towards the limit crashed MXNet here.
    assert len(ooms) == 1
    assert fits[0]["sweep"]["largest_fit"] * 2 == ooms[0]["batch_size"]
    result.stdout.fnmatch_lines(
        [
            "*float32: largest batch that fits * (limit: oom)*",
            "float32: not bisected between * and *: after a CPU allocation failure*",
            "float32: batch *: *Failed to allocate CPU Memory*",
        ]
    )


def _bf16_reason() -> str | None:
    from pytest_mxperf.backend.mxnet_backend import MXNetBackend
    from pytest_mxperf.measuring import dtype_support

    features = MXNetBackend().software()["mxnet_features"]
    return dtype_support.unsupported_dtype(
        "bfloat16", "cpu", "inference", flags=dtype_support.cpu_flags(), features=features
    )


def test_bfloat16_inference_on_cpu(pytester: pytest.Pytester) -> None:
    pytest.importorskip("mxnet")
    reason = _bf16_reason()
    if reason:
        pytest.skip(reason)
    from pytest_mxperf.backend.mxnet_backend import MXNetBackend
    from pytest_mxperf.measuring.measure import MeasureConfig
    from pytest_mxperf.measuring.protocol import PrepareSpec
    from pytest_mxperf.measuring.runner import run_case

    backend = MXNetBackend()
    from mxnet.gluon.model_zoo import vision

    spec = PrepareSpec(
        mode="inference",
        batch_size=2,
        ctx=backend.context("cpu"),
        dtype="bfloat16",
        input_shape=(3, 32, 32),
    )
    run = run_case(
        backend,
        vision.get_model("mobilenet0.25", classes=10),
        spec,
        MeasureConfig(min_time=0.2, max_time=0.5, warmup_time=1.0),
    )
    assert run.status.value == "ok", run.error


@pytest.mark.parametrize("dtype", ["float16", "amp"])
def test_float16_and_amp_on_gpu(dtype: str) -> None:
    pytest.importorskip("mxnet")
    from pytest_mxperf.backend.mxnet_backend import MXNetBackend

    backend = MXNetBackend()
    if backend.num_gpus() == 0:
        pytest.skip(f"{dtype}: no GPU here (MXNet sees none)")
    from mxnet.gluon.model_zoo import vision

    from pytest_mxperf.measuring.measure import MeasureConfig
    from pytest_mxperf.measuring.protocol import PrepareSpec
    from pytest_mxperf.measuring.runner import run_case

    spec = PrepareSpec(
        mode="inference",
        batch_size=8,
        ctx=backend.context("gpu"),
        dtype=dtype,
        input_shape=(3, 64, 64),
    )
    run = run_case(
        backend,
        vision.get_model("resnet18_v1", classes=10),
        spec,
        MeasureConfig(min_time=0.2, max_time=0.5, warmup_time=1.0),
    )
    assert run.status.value == "ok", run.error


DROP_SWEEP = """
from pytest_mxperf.testing import FakeModel
from limits import OOM_FROM

def test_auto(mxperf):
    s = mxperf.sweep(lambda: FakeModel(images_per_sec=500.0, oom_from_batch=OOM_FROM),
                     model="toy", max_batch=256)
    print("\\n".join(s.lines()))
"""


def test_a_drop_of_the_largest_fit_is_reported(fake_pytester: pytest.Pytester, commit: Any) -> None:
    """The stored sweep says batch 32 fitted; the model now runs out of memory from 20: the
    drop is named (a warning), and each point is judged against its own stored figure."""
    fake_pytester.makepyfile(test_drop=DROP_SWEEP, limits="OOM_FROM = 40\n")
    commit("suite")
    stored = fake_pytester.runpytest("--mxperf", "--mxperf-update")
    stored.assert_outcomes(passed=1)
    commit("store baselines")
    (fake_pytester.path / "limits.py").write_text("OOM_FROM = 20\n")
    commit("a model that needs more memory")
    result = fake_pytester.runpytest(
        "--mxperf",
        "--mxperf-arbitrate",
        "off",
        "--mxperf-json",
        "r.json",
        "-W",
        "default::pytest.PytestWarning",
    )
    drop = (
        "the largest batch that fits dropped from 32 to 16 (stopped by oom before): the model "
        "now needs more memory per batch"
    )
    result.stdout.fnmatch_lines(
        [
            "*mxperf sweep: toy, infer, cpu*",
            "float32: largest batch that fits 16 (limit: oom)*",
            f"float32: {drop}",
        ]
    )
    assert f"mxperf: sweep toy: float32: {drop}" in result.stdout.str()  # the warning
    cases = {c["key"]: c for c in json.loads((fake_pytester.path / "r.json").read_text())["cases"]}
    assert cases["toy/inference/float32/bs16/cpu"]["verdict"]["status"] == "pass"
    assert cases["toy/inference/float32/bs16/cpu"]["sweep"]["largest_fit_drop"] == drop
    # Batch 32 ran before and is out of memory now: that point alone is a regression.
    assert cases["toy/inference/float32/bs32/cpu"]["status"] == "oom"
    assert cases["toy/inference/float32/bs32/cpu"]["verdict"]["status"] == "regressed"
    result.assert_outcomes(failed=1)


def test_a_budget_below_the_first_batch_is_named(fake_pytester: pytest.Pytester) -> None:
    """--mxperf-memory-budget below what the process already holds: nothing is measured, and
    the test fails saying why (not a crash, not a pass; issue 29, item 17)."""
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeModel

        def test_auto(mxperf):
            mxperf.sweep(lambda: FakeModel(images_per_sec=500.0), model="toy", max_batch=64)
        """
    )
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-memory-budget", "1MiB", "-W", "default::pytest.PytestWarning"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "mxperf: sweep toy (inference): nothing measured: float32: no batch size fits "
            "(batch 1: the memory budget 1 MiB is below what the process already holds before "
            "the first batch (* MiB resident))*"
        ]
    )


def test_memory_kept_after_an_oom_is_named(fake_pytester: pytest.Pytester) -> None:
    """After a failed point the sweep frees what it can and syncs; if the process still holds
    much more than before it, the point's note says MXNet's pool or the allocator keeps it."""
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.measuring import sweep_memory
        from pytest_mxperf.testing import FakeModel

        def test_auto(mxperf, monkeypatch):
            held = sweep_memory.read_status()["VmRSS"] + 300 * 2**20
            monkeypatch.setattr(sweep_memory, "read_status", lambda: {"VmRSS": held})
            s = mxperf.sweep(lambda: FakeModel(images_per_sec=500.0, oom_from_batch=8),
                             model="toy", max_batch=64)
            curve = s.curves["float32"]
            assert curve.largest_fit == 4  # CPU: no bisection after the OOM at 8
            oom = [p for p in curve.points if p.status == "oom"]
            assert oom and all("MXNet's memory pool or the allocator keeps it" in p.note
                               for p in oom), [p.note for p in oom]
            assert any("batch 8: " in n and "more than before" in n for n in curve.notes)
        """
    )
    # In a subprocess: in-process runs re-import the package's lazily imported modules, so the
    # module the test patches need not be the one the fixture reads.
    fake_pytester.runpytest_subprocess(
        "--mxperf", "--mxperf-memory-budget", "64GiB"
    ).assert_outcomes(passed=1)
