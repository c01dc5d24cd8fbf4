"""The real MXNet back end without the two probes of the machine, for tests whose subject is
something else: the calibration probe (a small fixed network timed for about two seconds,
`pytest_mxperf.measuring.calibrate`) and the matrix-multiply peak (about a second, for each
case's % of peak). Every process that measures runs them once, a paired run's sides excepted;
a suite of real-MXNet runs that checks neither pays them in every one.

Install it in a suite's conftest (`UNPROBED_CONFTEST`)::

    @pytest.fixture(scope="session")
    def mxperf_backend():
        return UnprobedMXNetBackend()

Its runs measure every case with real MXNet as usual; their baseline files carry no
calibration (runs judge case by case, as with files stored before calibrations) and their
results no % of peak. The probes themselves are tested with the plain `MXNetBackend`.
"""

from __future__ import annotations

from typing import Any

from pytest_mxperf.backend.mxnet_backend import MXNetBackend


class UnprobedMXNetBackend(MXNetBackend):
    """`MXNetBackend` that runs neither the calibration probe nor the peak probe."""

    def peak_gflops(self, ctx: Any, dtype: str) -> float | None:
        """No peak: cases show no % of peak."""
        return None

    def calibration_net(self) -> Any:
        """No calibration probe (`Backend.calibration_net`)."""
        return None


#: A suite's conftest.py that measures with `UnprobedMXNetBackend`.
UNPROBED_CONFTEST = '''"""Real MXNet without the machine probes (pytest_mxperf.testing.unprobed)."""
import pytest

from pytest_mxperf.testing.unprobed import UnprobedMXNetBackend


@pytest.fixture(scope="session")
def mxperf_backend():
    return UnprobedMXNetBackend()
'''
