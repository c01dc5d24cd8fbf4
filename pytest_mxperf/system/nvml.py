"""GPU facts from NVML (``pynvml`` of ``nvidia-ml-py``, part of ``[cu112]``), no MXNet import.

NVML is the library ``nvidia-smi`` itself reads; asking it directly gives the GPU name, count,
driver, memory and compute capability without a subprocess or parsing text. Without NVML (no
``nvidia-ml-py``, or no driver) the facts come from ``nvidia-smi`` as before.

Which GPUs MXNet 1.9.1 cu112 can run on: its ``libmxnet.so`` carries machine code (SASS) for
compute capabilities 5.0, 6.0, 7.0, 8.0 and 8.6 and no PTX (read from the wheel's
``.nv_fatbin`` section; the build's ``MXNET_CUDA_ARCH`` is ``5.0;6.0;7.0;8.0;8.6``). SASS for
``X.Y`` also runs on ``X.Z`` with ``Z >= Y``, so 5.x, 6.x, 7.x (incl. T4 at 7.5) and 8.x
(incl. L4/RTX 40 at 8.9) run natively; with no PTX the driver has nothing to JIT for 9.0 and
newer (H100, Blackwell) or below 5.0 (K80), and MXNet's kernels fail there with "no kernel
image is available for execution on the device".
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

#: Compute capabilities with machine code in libmxnet.so of mxnet-cu112 1.9.1 (and PTX: none).
MXNET_CU112_SASS = ((5, 0), (6, 0), (7, 0), (8, 0), (8, 6))
MXNET_CU112_PTX: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class KernelSupport:
    """Whether MXNet 1.9.1 cu112 has kernels for a GPU, and which."""

    runs: bool
    kernels: str  # "sm_86", "compute_86 (PTX JIT)" or "none"
    message: str


def kernel_support(
    capability: tuple[int, int],
    sass: Sequence[tuple[int, int]] = MXNET_CU112_SASS,
    ptx: Sequence[tuple[int, int]] = MXNET_CU112_PTX,
) -> KernelSupport:
    """Which code of the build the driver would run on a GPU of ``capability``.

    CUDA's rules: SASS for ``X.Y`` runs on ``X.Z`` for ``Z >= Y`` (same major only); PTX for
    ``X.Y`` is JIT-compiled by the driver for any newer GPU.
    """
    major, minor = capability
    name = f"{major}.{minor}"
    native = [arch for arch in sass if arch[0] == major and arch[1] <= minor]
    if native:
        best = max(native)
        return KernelSupport(True, f"sm_{best[0]}{best[1]}", f"compute capability {name}: runs")
    jit = [arch for arch in ptx if arch <= capability]
    if jit:
        best = max(jit)
        return KernelSupport(
            True,
            f"compute_{best[0]}{best[1]} (PTX JIT)",
            f"compute capability {name}: the driver JIT-compiles the build's PTX (slow first "
            "run, cached in ~/.nv/ComputeCache)",
        )
    archs = ", ".join(f"{a}.{b}" for a, b in sass)
    return KernelSupport(
        False,
        "none",
        f"compute capability {name}: MXNet 1.9.1 cu112 has kernels for {archs} and no PTX the "
        "driver could JIT-compile, so GPU cases fail with 'no kernel image is available for "
        "execution on the device'",
    )


def load_pynvml() -> ModuleType | None:
    """The ``pynvml`` module of nvidia-ml-py, or None when it is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_gpus(pynvml: ModuleType | None = None) -> list[dict[str, str]] | None:
    """All GPUs in NVML order (which is nvidia-smi's), or None when NVML cannot be used.

    Each row: ``index``, ``uuid``, ``name`` (the keys ``fingerprint.visible_gpus`` has always
    had), ``driver``, ``memory_total_mib``, ``compute_capability`` and ``mxnet_kernels``.
    """
    nv = pynvml if pynvml is not None else load_pynvml()
    if nv is None:
        return None
    try:
        nv.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound / DriverNotLoaded: no driver here
        return None
    try:
        driver = _text(nv.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(int(nv.nvmlDeviceGetCount())):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
            memory = nv.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(
                {
                    "index": str(index),
                    "uuid": _text(nv.nvmlDeviceGetUUID(handle)),
                    "name": _text(nv.nvmlDeviceGetName(handle)),
                    "driver": driver,
                    "memory_total_mib": str(int(memory.total) // (1024 * 1024)),
                    "compute_capability": f"{int(major)}.{int(minor)}",
                    "mxnet_kernels": kernel_support((int(major), int(minor))).kernels,
                }
            )
        return gpus
    except Exception:  # a half-working NVML must not break a CPU run: fall back to nvidia-smi
        return None
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def select_visible(gpus: list[dict[str, str]], ids: Sequence[str] | None) -> list[dict[str, str]]:
    """``gpus`` as a CUDA process sees them: in CUDA_VISIBLE_DEVICES order (indices or UUID
    prefixes), stopping at the first entry no GPU has, as CUDA does."""
    if ids is None:
        return gpus
    chosen = []
    for ident in ids:
        match = next(
            (
                g
                for g in gpus
                if ident == g["index"] or (ident.startswith("GPU-") and g["uuid"].startswith(ident))
            ),
            None,
        )
        if match is None:
            break
        chosen.append(match)
    return chosen


def visible_gpus(env: Mapping[str, str], pynvml: ModuleType | None = None) -> list[dict[str, str]]:
    """GPUs a CUDA process sees, in CUDA order: NVML when available, else nvidia-smi."""
    from pytest_mxperf.system import fingerprint

    gpus = nvml_gpus(pynvml)
    if gpus is None:
        return fingerprint.visible_gpus(env)
    return select_visible(gpus, fingerprint.visible_gpu_ids(env))
