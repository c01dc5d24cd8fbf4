"""Loading the CUDA libraries of ``mxnet-cu112`` from NVIDIA's pip wheels before ``import mxnet``
(which `mxnet_import` does), and the message when loading ``libmxnet.so`` fails.
Finding the libraries is `pytest_mxperf.system.cudalibs`.

``libmxnet.so`` of ``mxnet-cu112==1.9.1`` links against the CUDA runtime, cuBLAS, cuDNN 8,
NCCL 2, NVRTC, cuRAND, cuFFT, cuSOLVER and NVTX by soname (``readelf -d``). The ``[cu112]``
extra installs those libraries as NVIDIA's ``nvidia-*-cu11`` wheels under
``site-packages/nvidia/*/lib``, which the loader does not search. :func:`preload` loads them
with ``RTLD_GLOBAL`` in dependency order before ``import mxnet``; the loader then finds every
soname ``libmxnet.so`` asks for already loaded, and only the NVIDIA driver (``libcuda.so.1``)
has to come from the machine. This is what PyTorch does for its own CUDA wheels.

Which libraries win (``strategy``, or ``PYTEST_MXPERF_CUDA``):

- ``auto`` (default): the system's CUDA libraries when the loader finds *all* of them
  (``LD_LIBRARY_PATH``, ``ldconfig`` cache, the default directories); else the pip wheels.
  A complete system install wins so that a runner with a tuned CUDA/cuDNN keeps it; a partial
  one does not, because mixing one cuDNN with another CUDA runtime is what breaks.
- ``pip``: always the pip wheels (they are loaded by absolute path, so they win over
  ``LD_LIBRARY_PATH``).
- ``system``: load nothing; the loader resolves everything as it would without this module.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_mxperf.system import cudalibs
from pytest_mxperf.system.cudalibs import DRIVER_SONAME

ENV_VAR = "PYTEST_MXPERF_CUDA"
STRATEGIES = ("auto", "pip", "system")
DRIVER_MESSAGE = "the NVIDIA driver (libcuda.so.1) was not found: this machine has no GPU driver"
#: Which wheel ships a library, by soname prefix (for the message naming a missing one).
WHEELS = {
    "libcudart": "nvidia-cuda-runtime-cu11",
    "libcublas": "nvidia-cublas-cu11",
    "libcudnn": "nvidia-cudnn-cu11",
    "libnccl": "nvidia-nccl-cu11",
    "libnvrtc": "nvidia-cuda-nvrtc-cu11",
    "libcurand": "nvidia-curand-cu11",
    "libcufft": "nvidia-cufft-cu11",
    "libcusolver": "nvidia-cusolver-cu11",
    "libnvToolsExt": "nvidia-nvtx-cu11",
}
_CPU_INSTALL = "pip install 'pytest-mxperf[cpu]'"


# preloading ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PreloadReport:
    """What :func:`preload` did: the strategy asked for and used, and each library's file."""

    requested: str
    used: str  # "pip", "system" or "none" (nothing to load: no wheels, or not a CUDA build)
    reason: str
    loaded: tuple[tuple[str, str], ...] = ()  # (soname, path) in load order
    failed: tuple[tuple[str, str], ...] = ()  # (soname, error)
    system: tuple[tuple[str, str], ...] = field(default=())  # (soname, path) the system has
    driver: str | None = None  # where libcuda.so.1 is, if the system loader can find it

    def describe(self) -> str:
        lines = [f"CUDA libraries: {self.used} (asked: {self.requested}; {self.reason})"]
        lines += [f"  loaded {name} from {path}" for name, path in self.loaded]
        lines += [f"  FAILED {name}: {error}" for name, error in self.failed]
        lines.append(f"  NVIDIA driver: {self.driver}" if self.driver else f"  {DRIVER_MESSAGE}")
        return "\n".join(lines)


_done: dict[str, PreloadReport] = {}  # process-wide, like the loaded libraries themselves


def resolve_strategy(strategy: str | None, env: Mapping[str, str]) -> tuple[str, str]:
    """The strategy asked for and where it came from (argument > PYTEST_MXPERF_CUDA > auto)."""
    if strategy is not None:
        source, value = "argument", strategy
    elif env.get(ENV_VAR):
        source, value = ENV_VAR, env[ENV_VAR]
    else:
        return "auto", "default"
    value = value.strip().lower()
    if value not in STRATEGIES:
        raise ValueError(
            f"{source}: unknown CUDA library strategy {value!r}; "
            f"choose from {', '.join(STRATEGIES)}"
        )
    return value, source


def plan(
    strategy: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    pip_dirs: Sequence[Path] | None = None,
    required: Sequence[str] | None = None,
    cache: Mapping[str, str] | None = None,
) -> tuple[PreloadReport, list[tuple[str, Path]]]:
    """Decide without loading: the report so far and the (soname, file) list to load."""
    env = os.environ if env is None else env
    asked, source = resolve_strategy(strategy, env)
    required = tuple(cudalibs.required_sonames() if required is None else required)
    cache = cudalibs.ldconfig_cache() if cache is None else cache
    driver = cudalibs.find_system(DRIVER_SONAME, env, cache)
    system = tuple(
        (name, where)
        for name in required
        if (where := cudalibs.find_system(name, env, cache)) is not None
    )

    def report(used: str, reason: str) -> PreloadReport:
        return PreloadReport(asked, used, reason, system=system, driver=driver)

    if asked == "system":
        return report("system", f"chosen by {source}"), []
    if not required:
        return report("none", "the installed MXNet needs no CUDA library"), []
    if asked == "auto" and len(system) == len(required):
        return report("system", "the system provides every CUDA library libmxnet.so needs"), []
    available = cudalibs.scan(cudalibs.pip_library_dirs() if pip_dirs is None else pip_dirs)
    if not available:
        return report(
            "none", "no NVIDIA pip wheels installed (pip install 'pytest-mxperf[cu112]')"
        ), []
    needs = {name: cudalibs.read_dynamic(path).needed for name, path in available.items()}
    order = cudalibs.load_order(required, available, needs)
    if asked != "auto":
        reason = f"chosen by {source}"
    elif system:
        reason = "the system lacks " + ", ".join(n for n in required if n not in dict(system))
    else:
        reason = "no system CUDA libraries found"
    return report("pip", reason), [(n, available[n]) for n in order]


def preload(strategy: str | None = None) -> PreloadReport:
    """Load the CUDA libraries ``mxnet-cu112`` needs from NVIDIA's pip wheels, before
    ``import mxnet``; call it in a conftest if you import MXNet yourself before the plugin does.

    ``strategy``: ``"auto"``, ``"pip"`` or ``"system"`` (default: ``PYTEST_MXPERF_CUDA``, else
    ``auto``; see the module docstring for which wins). Idempotent: later calls return the
    first report. A library that fails to load is listed in ``failed``, not raised: ``import
    mxnet`` then names what is missing.
    """
    if _done:
        return next(iter(_done.values()))
    report, files = plan(strategy)
    loaded, failed = [], []
    for name, path in files:
        try:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            failed.append((name, str(exc)))
        else:
            loaded.append((name, str(path)))
    report = dataclasses.replace(report, loaded=tuple(loaded), failed=tuple(failed))
    _done["report"] = report
    return report


def explain_import_error(exc: BaseException) -> str:
    """One sentence for MXNet's failure to load ``libmxnet.so``: the driver message when the
    driver is what is missing, else the missing library and how to provide it."""
    text = str(exc)
    found = re.search(r"(lib[A-Za-z0-9_+-]+\.so[0-9.]*)", text)
    lib = found.group(1).rstrip(".") if found else None
    if lib in (DRIVER_SONAME, "libcuda.so"):
        return DRIVER_MESSAGE
    if lib is None:
        return f"MXNet could not load its shared library ({text})"
    stem = lib.split(".so")[0]
    wheel = next((w for prefix, w in WHEELS.items() if stem.startswith(prefix)), None)
    message = f"MXNet could not load the shared library {lib}"
    if wheel:
        message += f": it comes with the {wheel} wheel (pip install 'pytest-mxperf[cu112]')"
        report = _done.get("report")
        if report is not None and report.used == "system":
            message += f", which {ENV_VAR}=pip or auto loads"
    return f"{message}; on a machine without a GPU install the CPU build: {_CPU_INSTALL}"
