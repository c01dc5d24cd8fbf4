"""Typed records: case keys, the runner shared by every caller, and the back-end protocol."""

from __future__ import annotations

import pytest

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.measure import MeasureConfig, Measurement
from pytest_mxperf.measuring.protocol import Backend, PrepareSpec
from pytest_mxperf.measuring.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.measuring.runner import run_case
from pytest_mxperf.system import codec
from pytest_mxperf.testing import FakeBackend, FakeModel, MXNetError

QUICK = MeasureConfig(min_time=0.1, max_time=0.5, warmup_time=1.0)


@pytest.mark.parametrize(
    "key",
    [
        CaseKey("resnet50_v1", "inference", "float32", 32, "cpu"),
        CaseKey("m", "training", "float16", 1, "gpu", name="nhwc"),
        CaseKey("m", "training", "float32", 8, "cpu", world_size=2),
        CaseKey("m", "training", "float32", 8, "gpu", name="nccl", world_size=4),
    ],
)
def test_case_key_round_trips_through_text(key: CaseKey) -> None:
    assert CaseKey.parse(str(key)) == key


def test_case_key_text_is_the_stored_form() -> None:
    key = CaseKey("resnet50_v1", "inference", "float32", 32, "cpu", name="x")
    assert str(key) == "resnet50_v1/inference/float32/bs32/cpu/x"
    assert key.label == "resnet50_v1 [x]"


@pytest.mark.parametrize("text", ["a/b", "m/inference/float32/32/cpu", "a/b/c/bs1/cpu/x/y"])
def test_case_key_parse_rejects_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="not a case key"):
        CaseKey.parse(text)


def test_case_key_refuses_slashes_in_labels() -> None:
    with pytest.raises(ValueError, match="no '/'"):
        CaseKey("a/b", "inference", "float32", 1, "cpu")


def test_verdict_round_trip_keeps_the_outcome_enum() -> None:
    v = Verdict(Outcome.BELOW, True, ("msg",), expected=3.0)
    data = codec.to_dict(v)
    assert data["status"] == "below expectation"
    assert codec.from_dict(Verdict, data) == v


def test_prepare_spec_names_an_unknown_option() -> None:
    with pytest.raises(TypeError, match=r"unknown option.*input_shap"):
        PrepareSpec.from_options(
            mode="inference", batch_size=1, ctx=None, dtype="float32", options={"input_shap": 1}
        )
    with pytest.raises(ValueError, match="unknown mode"):
        PrepareSpec(mode="predict", batch_size=1, ctx=None)


def test_both_back_ends_satisfy_the_protocol() -> None:
    fake: Backend = FakeBackend()  # mypy checks this assignment against the Protocol
    assert fake.describe(fake.context("gpu", 1)) == ("gpu", 1)
    # MXNetBackend is checked the same way in test_backend.py (it needs MXNet).


def spec(batch: int = 8, mode: str = "inference") -> PrepareSpec:
    return PrepareSpec(mode=mode, batch_size=batch, ctx=None)


def test_run_case_measures_on_the_virtual_clock() -> None:
    run = run_case(FakeBackend(), FakeModel(400.0), spec(), QUICK)
    assert run.status == Status.OK and run.error is None
    assert run.measurement is not None
    assert run.measurement.items_per_sec == pytest.approx(400.0)
    assert run.measurement.extra == {"form": "fake"}
    assert run.attempts == [pytest.approx(400.0)]


def test_run_case_measures_again_only_while_asked() -> None:
    asked: list[Measurement] = []

    def again(best: Measurement) -> bool:
        asked.append(best)
        return len(asked) < 2

    run = run_case(FakeBackend(), FakeModel(100.0), spec(), QUICK, attempts=5, again=again)
    assert len(run.attempts) == 2 and len(asked) == 2


def test_run_case_oom_nan_and_errors_are_results() -> None:
    oom = run_case(FakeBackend(), FakeModel(1.0, oom_from_batch=4), spec(8), QUICK)
    assert oom.status == Status.OOM and oom.measurement is None
    assert "out of memory" in (oom.error or "")
    nan = run_case(FakeBackend(), FakeModel(10.0, nan=True), spec(), QUICK)
    assert nan.status == Status.NAN and "NaN" in (nan.error or "")

    def boom() -> None:
        raise MXNetError("kernel exploded")

    err = run_case(FakeBackend(), boom, PrepareSpec("inference", 1, None, items_per_call=1), QUICK)
    assert err.status == Status.ERROR and err.error == "MXNetError: kernel exploded"


def test_run_case_lets_usage_errors_through() -> None:
    with pytest.raises(TypeError, match="FakeBackend benchmarks FakeModel"):
        run_case(FakeBackend(), object(), spec(), QUICK)


def test_case_result_reads_its_key_parts() -> None:
    r = CaseResult(CaseKey("m", "training", "float16", 4, "gpu"), "gpu(0)", "gpu-x-x1")
    assert (r.model, r.mode, r.dtype, r.batch_size, r.device_kind) == (
        "m",
        "training",
        "float16",
        4,
        "gpu",
    )
    assert r.images_per_sec is None and r.rel_iqr == 0.0
