"""Strong scaling end to end with real MXNet: a small MLP on two CPU devices of this process
(``local`` kvstore). Asserts what each run trained a step, never how fast it ran."""

from __future__ import annotations

import pytest
from dp_ranks import TINY

from pytest_mxperf.distributed.local import run_in_process
from pytest_mxperf.measuring.dp_scaling import DataParallelSpec

pytest.importorskip("mxnet")


def test_strong_scaling_in_process_splits_the_total_and_times_one_device_at_it() -> None:
    spec = DataParallelSpec(
        factory="mxperf_dp_models:dense_net",
        batch_per_device=1,
        input_shape=(3, 32, 32),
        kvstore="local",
        contexts=("cpu(0)", "cpu(1)"),
        measure=TINY,  # what the runs did is checked, not their figures
    ).split(32)
    result = run_in_process(spec)
    (single,) = result.single.workers
    (scaled,) = result.scaled.workers
    assert single.contexts == ("cpu(0)",) and scaled.contexts == ("cpu(0)", "cpu(1)")
    # One device trained the whole total a step; the two devices 16 each, 32 together.
    assert single.full.items_per_step == 32
    assert scaled.full.items_per_step == 32
    s = result.scaling()
    assert (s.kind, s.batch_per_device, s.single_batch_per_device, s.total_batch) == (
        "strong",
        16,
        32,
        32,
    )
    assert s.efficiency > 0
    assert result.speedup == pytest.approx(2 * s.efficiency)
