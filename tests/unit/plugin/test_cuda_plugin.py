"""The plugin preloads the pip CUDA libraries before conftests and test modules import MXNet
(issue #17): a test file with ``import mxnet`` at its top must not fail on ``libcudnn.so.8``."""

from __future__ import annotations

import types

import pytest

from pytest_mxperf.system import cuda, cudalibs

CONFTEST = """
from pytest_mxperf.system import cuda

# What a conftest importing MXNet at its top relies on: the preload already happened.
assert cuda.preload.calls == ["preload"], cuda.preload.calls
"""


class FakePreload:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.error = error

    def __call__(self, strategy: str | None = None) -> None:
        self.calls.append("preload")
        if self.error is not None:
            raise self.error


def test_preload_runs_before_the_first_conftest(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cudalibs, "cuda_build", lambda: "mxnet-cu112")
    monkeypatch.setattr(cuda, "preload", FakePreload())
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1)


def test_no_preload_for_the_cpu_build(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakePreload()
    monkeypatch.setattr(cudalibs, "cuda_build", lambda: None)
    monkeypatch.setattr(cuda, "preload", fake)
    pytester.makepyfile("def test_ok():\n    pass\n")
    pytester.runpytest_inprocess().assert_outcomes(passed=1)
    assert fake.calls == []


def test_a_bad_strategy_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = ValueError("PYTEST_MXPERF_CUDA: unknown CUDA library strategy 'gpu'")
    monkeypatch.setattr(cudalibs, "cuda_build", lambda: "mxnet-cu112")
    monkeypatch.setattr(cuda, "preload", FakePreload(error))
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*mxperf: PYTEST_MXPERF_CUDA: unknown CUDA library strategy*"])


def fake_pynvml(count: int) -> types.ModuleType:
    """nvidia-ml-py's pynvml with ``count`` A100s (the calls pytest_mxperf.system.nvml makes)."""
    mod = types.ModuleType("pynvml")
    calls = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlDeviceGetCount": lambda: count,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: "NVIDIA A100-SXM4-40GB",
        "nvmlDeviceGetUUID": lambda h: f"GPU-{h:04d}",
        "nvmlDeviceGetCudaComputeCapability": lambda h: (8, 0),
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=40 * 1024**3),
    }
    for name, call in calls.items():
        setattr(mod, name, call)
    return mod


@pytest.mark.parametrize(("gpus", "kind"), [(1, "gpu"), (0, "cpu")])
def test_mx_ctx_auto_follows_nvml(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, gpus: int, kind: str
) -> None:
    """``--mxperf-ctx auto`` picks the GPU where NVML counts one (and MXNet is a CUDA build),
    without nvidia-smi."""
    import subprocess
    import sys

    from pytest_mxperf.plugin import configure

    def no_smi(*args: object, **kwargs: object) -> object:
        raise AssertionError("nvidia-smi must not run when NVML answers")

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus))
    monkeypatch.setattr(subprocess, "run", no_smi)
    monkeypatch.setattr(configure, "_mxnet_has_cuda", lambda: True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("PYTEST_MXPERF_CTX", raising=False)
    pytester.makepyfile("def test_ctx(mx_ctx):\n    pass\n")
    result = pytester.runpytest_inprocess("--mxperf", "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"*::test_ctx[[]{kind}[]]"])
