"""The real preload: NVIDIA's cu11 wheels loaded before mxnet-cu112, on a machine without GPU.

Runs only where mxnet-cu112 and the wheels are installed (``tox -e cu112-preload``: 2.8 GB,
kept out of the default run). In a fresh process, so no MXNet is imported before the preload.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_mxperf.system import cudalibs

pytestmark = pytest.mark.skipif(
    cudalibs.cuda_build() is None or not cudalibs.pip_library_dirs(),
    reason="needs mxnet-cu112 and NVIDIA's cu11 wheels: tox -e cu112-preload",
)

SCRIPT = """
import json
from pytest_mxperf.system import cuda
from pytest_mxperf.system import cudalibs
from pytest_mxperf.system.mxnet_import import MXNetUnavailable, import_mxnet

report = cuda.preload()
out = {
    "used": report.used,
    "loaded": [name for name, _ in report.loaded],
    "failed": report.failed,
    "driver": report.driver,
    "missing": cudalibs.missing_libraries(cudalibs.mxnet_library()),
}
try:
    import_mxnet()
    out["import"] = "ok"
except MXNetUnavailable as exc:
    out["import"] = str(exc)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def outcome() -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=True
    )
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


def test_the_wheels_provide_every_cuda_library(outcome: dict[str, object]) -> None:
    assert outcome["used"] in ("pip", "system")
    if outcome["used"] == "pip":
        loaded = outcome["loaded"]
        assert isinstance(loaded, list) and set(cudalibs.required_sonames()) <= set(loaded)
        assert outcome["failed"] == []


def test_only_the_driver_is_missing(outcome: dict[str, object]) -> None:
    if outcome["driver"]:
        assert outcome["missing"] == [] and outcome["import"] == "ok"
    else:
        assert outcome["missing"] == ["libcuda.so.1"]
        assert outcome["import"] == (
            "the NVIDIA driver (libcuda.so.1) was not found: this machine has no GPU driver"
        )
