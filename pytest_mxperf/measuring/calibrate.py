"""The calibration probe: one small fixed network timed for about a second, the same way on
every machine, so a run can compare this machine with the one that stored a baseline file
before its first case (`pytest_mxperf.baselines.calibration`; `pytest_mxperf.case.jointpair`).

Eight 3x3 convolutions of 32 channels on 3x32x32 images at batch 8, inference: the work of the
suite's small CNN cases, not a matrix-multiply peak (a host can reach the same GFLOP/s on large
products and still run small convolutions a third slower). Its figure decides only whether the
stored figures are trusted or every case is paired; it never scales a figure.
"""

from __future__ import annotations

from typing import Any

from pytest_mxperf.measuring.measure import MeasureConfig
from pytest_mxperf.measuring.protocol import Backend, PrepareSpec
from pytest_mxperf.measuring.runner import run_case

BATCH = 8
INPUT_SHAPE = (3, 32, 32)
#: About a second of timed blocks after a short warm-up.
CONFIG = MeasureConfig(min_time=1.0, max_time=2.0, warmup_time=1.0)


def calibrate(backend: Backend, ctx: Any) -> float | None:
    """Images/sec of the probe on ``ctx``, measured as any case is (`runner.run_case`); None
    when the probe could not be measured (out of memory, an error of the back end) or the back
    end has none (`Backend.calibration_net`)."""
    net = backend.calibration_net()
    if net is None:
        return None
    spec = PrepareSpec(mode="inference", batch_size=BATCH, ctx=ctx, input_shape=INPUT_SHAPE)
    run = run_case(backend, net, spec, CONFIG)
    return None if run.measurement is None else run.measurement.items_per_sec
