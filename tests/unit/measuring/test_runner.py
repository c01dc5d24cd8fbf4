"""`run_case` with the fake back end: how a case ends when the model fails, and which of its
attempts counts."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mxperf.measuring.measure import MAX_REL_IQR, MeasureConfig, Measurement
from pytest_mxperf.measuring.protocol import ModelTypeError, Prepared, PrepareSpec, SpecError
from pytest_mxperf.measuring.records import Status
from pytest_mxperf.measuring.runner import better_attempt, run_case
from pytest_mxperf.testing import OOM_MESSAGE, FakeBackend, FakeContext, FakeModel, MXNetError

FAST = MeasureConfig(min_time=0.5, max_time=1.0, warmup_time=1.0)
#: What MXNet 1.9 says when a CPU allocation fails (src/storage/cpu_device_storage.h).
CPU_OOM = (
    'Traceback (most recent call last):\n  File "../src/storage/./cpu_device_storage.h", '
    "line 74\nMXNetError: Failed to allocate CPU Memory"
)


def spec(batch_size: int = 8, **kw: Any) -> PrepareSpec:
    return PrepareSpec(mode="inference", batch_size=batch_size, ctx=FakeContext("cpu"), **kw)


class FailingBackend(FakeBackend):
    """Raises ``error`` from the first step of the model (as MXNet does, asynchronously)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def prepare(self, model: Any, spec: PrepareSpec) -> Prepared:
        def step() -> None:
            raise self.error

        return Prepared(step, spec.batch_size)


@pytest.mark.parametrize("message", [OOM_MESSAGE, "CUDA: out of memory", CPU_OOM])
def test_out_of_memory_messages_are_oom_results(message: str) -> None:
    backend = FailingBackend(MXNetError(message))
    run = run_case(backend, FakeModel(100.0), spec(), FAST)
    assert run.status == Status.OOM and run.measurement is None
    assert run.error == message.splitlines()[-1]
    # the next case measures normally
    ok = run_case(FakeBackend(), FakeModel(100.0), spec(), FAST)
    assert ok.status == Status.OK and ok.measurement is not None


def test_gpu_oom_at_a_batch_size_from_the_fake_model() -> None:
    run = run_case(FakeBackend(gpus=1), FakeModel(100.0, oom_from_batch=64), spec(64), FAST)
    assert run.status == Status.OOM and "cudaMalloc retry failed: out of memory" in str(run.error)


@pytest.mark.parametrize(
    "error", [ValueError("bad shape"), TypeError("f() takes 0 args"), KeyError("x")]
)
def test_any_exception_from_the_model_is_an_error_row(error: Exception) -> None:
    run = run_case(FailingBackend(error), FakeModel(100.0), spec(), FAST)
    assert run.status == Status.ERROR and run.measurement is None
    assert run.error == f"{type(error).__name__}: {error}"


def test_what_cannot_be_benchmarked_is_a_usage_error() -> None:
    with pytest.raises(ModelTypeError, match="FakeBackend benchmarks FakeModel objects") as info:
        run_case(FakeBackend(), object(), spec(), FAST)
    assert isinstance(info.value, TypeError) and isinstance(info.value, SpecError)


def test_a_callable_returning_none_is_flagged() -> None:
    silent = run_case(FakeBackend(), lambda: None, spec(items_per_call=8), FAST)
    assert silent.status == Status.OK
    (warning,) = silent.warnings
    assert warning.startswith("the callable returned None on every call: no NDArray to wait on")
    assert "one call took 1e+03 µs" in warning
    useful = run_case(FakeBackend(), lambda: 1, spec(items_per_call=8), FAST)
    assert useful.warnings == []
    assert run_case(FakeBackend(), FakeModel(100.0), spec(), FAST).warnings == []


def blocks(*rates: float) -> Measurement:
    """A measurement of 8 images a block at these block rates."""
    return Measurement(8, 1, tuple(8 / r for r in rates), 3, 0.1, True, 0.01, 0.0)


def test_a_steady_attempt_beats_a_faster_spread_one() -> None:
    spread, steady, faster = blocks(60, 150, 200, 90, 180), blocks(99, 100, 101), blocks(110, 111)
    assert spread.rel_iqr > MAX_REL_IQR and not spread.steady and steady.steady
    assert spread.items_per_sec > steady.items_per_sec
    assert better_attempt(steady, spread) and not better_attempt(spread, steady)
    # among steady attempts (or among spread ones) the faster counts
    assert better_attempt(faster, steady) and not better_attempt(steady, faster)
    wider = blocks(50, 160, 210, 90, 180)
    assert not wider.steady and wider.items_per_sec > spread.items_per_sec
    assert better_attempt(wider, spread) and not better_attempt(spread, wider)


def test_a_spread_attempt_is_measured_again_and_the_steady_one_counts() -> None:
    # Every third block 3x slower, the others 0.8x, for 8 virtual seconds: the first attempt.
    model = FakeModel(100.0, busy_for=8.0)
    seen: list[Measurement] = []

    def again(best: Measurement) -> bool:
        seen.append(best)
        return not best.steady

    run = run_case(FakeBackend(), model, spec(), MeasureConfig(), attempts=3, again=again)
    assert len(seen) == 2 and not seen[0].steady and seen[1].steady  # stopped once steady
    assert seen[0].items_per_sec > 1.2 * seen[1].items_per_sec  # the spread one was faster
    assert len(run.attempts) == 2
    assert run.measurement is not None and run.measurement.steady
    assert run.measurement.block_seconds == seen[1].block_seconds
