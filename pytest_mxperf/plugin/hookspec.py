"""Hooks pytest-mxperf offers to conftest files and plugins (added through ``pytest_addhooks``)."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_mxperf_hardware_key(config: pytest.Config, detected: str) -> str | None:
    """Name this machine for baselines: return the hardware key CPU cases are stored under
    (GPU cases get ``<key>-gpu-x<count>``), or None to keep ``detected``.

    For CI fleets whose runners differ in name only, e.g. a conftest returning
    ``os.environ.get("RUNNER_CLASS")``. ``--mxperf-machine`` (or its env/ini) wins over the hook.
    Called once, on the xdist controller.
    """
