"""pytest_mxperf.system.nvml: GPU facts from a fake pynvml, CUDA_VISIBLE_DEVICES order, fallbacks."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import pytest

from pytest_mxperf.system import nvml

GPUS = [  # name, uuid, compute capability, memory bytes
    ("Tesla V100-SXM2-16GB", "GPU-aaaa-1111", (7, 0), 16 * 1024**3),
    (b"Tesla T4", b"GPU-bbbb-2222", (7, 5), 15 * 1024**3),  # older pynvml returns bytes
    ("NVIDIA H100 80GB HBM3", "GPU-cccc-3333", (9, 0), 80 * 1024**3),
]


class NVMLError(Exception):
    pass


def fake_pynvml(
    gpus: list[tuple[Any, Any, tuple[int, int], int]] = GPUS, *, init_fails: bool = False
) -> types.ModuleType:
    """A stand-in for nvidia-ml-py's pynvml with the calls nvml.py makes."""
    mod = types.ModuleType("pynvml")
    state = {"init": 0, "shutdown": 0}

    def init() -> None:
        if init_fails:
            raise NVMLError("NVML Shared Library Not Found")
        state["init"] += 1

    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: state.__setitem__("shutdown", state["shutdown"] + 1)  # type: ignore[attr-defined]
    mod.nvmlSystemGetDriverVersion = lambda: "550.54.15"  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: len(gpus)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: gpus[i]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda h: h[0]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetUUID = lambda h: h[1]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCudaComputeCapability = lambda h: h[2]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=h[3], free=0, used=0)  # type: ignore[attr-defined]
    mod.state = state  # type: ignore[attr-defined]
    return mod


def test_facts_from_nvml() -> None:
    nv = fake_pynvml()
    gpus = nvml.nvml_gpus(nv)
    assert gpus is not None
    assert gpus[1] == {
        "index": "1",
        "uuid": "GPU-bbbb-2222",
        "name": "Tesla T4",
        "driver": "550.54.15",
        "memory_total_mib": "15360",
        "compute_capability": "7.5",
        "mxnet_kernels": "sm_70",
    }
    assert [g["mxnet_kernels"] for g in gpus] == ["sm_70", "sm_70", "none"]
    assert nv.state == {"init": 1, "shutdown": 1}


@pytest.mark.parametrize(
    ("cvd", "expected"),
    [
        (None, ["0", "1", "2"]),
        ("2,0", ["2", "0"]),
        ("GPU-bbbb,0", ["1", "0"]),
        ("1,7,0", ["1"]),  # CUDA stops at the first entry no device has
        ("", []),
    ],
)
def test_visible_gpus_in_cuda_order(cvd: str | None, expected: list[str]) -> None:
    env = {} if cvd is None else {"CUDA_VISIBLE_DEVICES": cvd}
    assert [g["index"] for g in nvml.visible_gpus(env, fake_pynvml())] == expected


def test_nvml_is_asked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # The session's GPU list (and so mx_ctx's auto choice) comes from nvml.visible_gpus.
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())

    def no_smi(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nvidia-smi must not run when NVML answers")

    monkeypatch.setattr(subprocess, "run", no_smi)
    gpus = nvml.visible_gpus({"CUDA_VISIBLE_DEVICES": "2"})
    assert [(g["name"], g["compute_capability"]) for g in gpus] == [
        ("NVIDIA H100 80GB HBM3", "9.0")
    ]


SMI = "0, GPU-aaaa-1111, Tesla V100-SXM2-16GB\n1, GPU-bbbb-2222, Tesla T4\n"


@pytest.mark.parametrize("pynvml", [None, fake_pynvml(init_fails=True)])
def test_falls_back_to_nvidia_smi(monkeypatch: pytest.MonkeyPatch, pynvml: Any) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", pynvml)  # None: `import pynvml` raises ImportError
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=SMI),
    )
    gpus = nvml.visible_gpus({"CUDA_VISIBLE_DEVICES": "1"})
    assert gpus == [{"index": "1", "uuid": "GPU-bbbb-2222", "name": "Tesla T4"}]


def test_no_nvml_and_no_nvidia_smi_means_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(subprocess, "run", missing)
    assert nvml.visible_gpus({}) == []


def test_a_broken_nvml_call_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    nv = fake_pynvml()

    def broken(handle: Any) -> Any:
        raise NVMLError("Not Supported")

    nv.nvmlDeviceGetMemoryInfo = broken  # type: ignore[attr-defined]
    assert nvml.nvml_gpus(nv) is None
    assert nv.state["shutdown"] == 1


@pytest.mark.parametrize(
    ("capability", "runs", "kernels"),
    [
        ((5, 2), True, "sm_50"),  # Maxwell M60
        ((6, 1), True, "sm_60"),  # P4 / P40
        ((7, 0), True, "sm_70"),  # V100
        ((7, 5), True, "sm_70"),  # T4: sm_70 SASS runs on 7.5
        ((8, 0), True, "sm_80"),  # A100
        ((8, 6), True, "sm_86"),  # A10, RTX 30
        ((8, 9), True, "sm_86"),  # L4, RTX 40
        ((9, 0), False, "none"),  # H100: no sm_90 SASS, no PTX to JIT
        ((12, 0), False, "none"),  # Blackwell
        ((3, 7), False, "none"),  # K80
    ],
)
def test_kernel_support_of_mxnet_cu112(
    capability: tuple[int, int], runs: bool, kernels: str
) -> None:
    support = nvml.kernel_support(capability)
    assert (support.runs, support.kernels) == (runs, kernels)
    if not runs:
        assert "no kernel image is available" in support.message


def test_ptx_would_be_jit_compiled_for_newer_gpus() -> None:
    support = nvml.kernel_support((9, 0), sass=[(8, 6)], ptx=[(8, 6)])
    assert (support.runs, support.kernels) == (True, "compute_86 (PTX JIT)")
