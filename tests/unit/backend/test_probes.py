"""The two probes of the machine with real MXNet: the calibration probe's network measures
(baseline files carry its figure) and the matrix-multiply peak gives GFLOP/s; the suites'
real-MXNet runs measure without both (`pytest_mxperf.testing.unprobed`), so they are checked
here. Nothing is asserted about how fast: only that each gives a figure, or none."""

from __future__ import annotations

import pytest

mx = pytest.importorskip("mxnet")

from pytest_mxperf.backend.mxnet_backend import MXNetBackend  # noqa: E402
from pytest_mxperf.measuring.calibrate import calibrate  # noqa: E402
from pytest_mxperf.measuring.protocol import Backend  # noqa: E402
from pytest_mxperf.testing.unprobed import UnprobedMXNetBackend  # noqa: E402


def test_the_calibration_probe_and_the_peak_measure_with_real_mxnet() -> None:
    backend = MXNetBackend()
    probe = calibrate(backend, mx.cpu())
    assert probe is not None and probe > 0
    peak = backend.peak_gflops(mx.cpu(), "float32")
    assert peak is not None and peak > 0


def test_the_unprobed_back_end_gives_neither() -> None:
    unprobed: Backend = UnprobedMXNetBackend()  # mypy checks it against the Protocol
    assert calibrate(unprobed, mx.cpu()) is None
    assert unprobed.peak_gflops(mx.cpu(), "float32") is None
