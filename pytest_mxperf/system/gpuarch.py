"""Refuse a GPU run the installed MXNet build has no kernels for, before any case runs.

Why: ``mxnet-cu112==1.9.1`` (and every other 1.9.1 CUDA wheel, cu113..cu117) carries machine
code for compute capabilities 5.0, 6.0, 7.0, 8.0 and 8.6 and no PTX. On an H100 (9.0) MXNet
imports, counts the GPU and allocates on it, and then every kernel fails with "no kernel image
is available for execution on the device": each GPU case errors with that, one by one, and
nothing says that the build, not the model, is the problem. The check compares the compute
capability of each visible GPU (from NVML, `pytest_mxperf.system.nvml`) with the archs read
from the installed ``libmxnet.so`` (`pytest_mxperf.system.fatbin`) and gives one message naming
the GPU, what the build supports and which wheel would run there, if any.

CUDA's rules (the CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility"):
a cubin for ``X.y`` runs on ``X.z`` for ``z >= y``, the same major only; PTX for ``X.y`` is
JIT-compiled by the driver for any GPU of compute capability ``>= X.y``.

Cost: nothing on a CPU run. The library is read only when GPU cases would run (``--mxperf-ctx``
asks for ``gpu``, or is ``auto`` and NVML sees a GPU), and then only the fat binary headers
(milliseconds).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_mxperf.system import cudalibs, fatbin

Capability = tuple[int, int]
_WHEEL_SASS = frozenset({(5, 0), (6, 0), (7, 0), (8, 0), (8, 6)})
#: The 1.9.1 CUDA wheels on PyPI and the code their libmxnet.so carries (cubins, PTX), as
#: `pytest_mxperf.system.fatbin` reads it and ``cuobjdump --list-elf/--list-ptx`` agrees
#: (197-198 containers each, every one with exactly these five cubins).
WHEELS: Mapping[str, tuple[frozenset[Capability], frozenset[Capability]]] = {
    f"mxnet-cu{v}": (_WHEEL_SASS, frozenset()) for v in (112, 113, 114, 115, 116, 117)
}
#: The wheels this package has an extra for (the NVIDIA libraries they need).
EXTRAS = {"mxnet-cu112": "cu112"}
MXNET_VERSION = "1.9.1"
NO_KERNEL = "no kernel image is available for execution on the device"


@dataclass(frozen=True)
class Refusal:
    """GPUs the build cannot run on, and the message that says so."""

    gpus: tuple[Mapping[str, str], ...]
    message: str


def code_for(
    capability: Capability, cubins: frozenset[Capability], ptx: frozenset[Capability]
) -> str | None:
    """The code of a build the driver would run on a GPU of ``capability``: ``"sm_86"``,
    ``"compute_80 (PTX, JIT-compiled)"``, or None when there is none."""
    major, minor = capability
    native = [arch for arch in cubins if arch[0] == major and arch[1] <= minor]
    if native:
        best = max(native)
        return f"sm_{best[0]}{best[1]}"
    jit = [arch for arch in ptx if arch <= capability]
    if jit:
        best = max(jit)
        return f"compute_{best[0]}{best[1]} (PTX, JIT-compiled by the driver)"
    return None


def runs_on(archs: fatbin.CudaArchs) -> str:
    """The compute capabilities a build runs on, in words: ``"5.x, 6.x, 7.x and 8.x"``."""
    parts = []
    for major in sorted({a[0] for a in archs.cubins}):
        low = min(minor for m, minor in archs.cubins if m == major)
        parts.append(f"{major}.x" if low == 0 else f"{major}.{low}-{major}.x")
    if archs.ptx:
        low_major, low_minor = min(archs.ptx)
        parts.append(f"{low_major}.{low_minor} and newer through PTX")
    if not parts:
        return "no GPU"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def capability_of(gpu: Mapping[str, str]) -> Capability | None:
    """A GPU row's ``compute_capability`` (``"9.0"``) as ``(9, 0)``; None when unknown (the
    nvidia-smi fallback of `pytest_mxperf.system.nvml` has none)."""
    text = gpu.get("compute_capability", "")
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def wheels_for(capability: Capability) -> list[str]:
    """The 1.9.1 wheels whose code runs on ``capability``."""
    return [name for name, (sass, ptx) in WHEELS.items() if code_for(capability, sass, ptx)]


def installed_build() -> str:
    """``"mxnet-cu112 1.9.1"``: the installed MXNet distribution, from package metadata."""
    for name in (*WHEELS, "mxnet"):
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "the installed MXNet"


def refusal(
    gpus: Sequence[Mapping[str, str]],
    archs: fatbin.CudaArchs,
    *,
    build: str,
    library: str | os.PathLike[str],
) -> Refusal | None:
    """The message for the GPUs of ``gpus`` the build cannot run on, or None if it runs on all
    (GPUs of unknown compute capability are not judged)."""
    bad = [
        g
        for g in gpus
        if (cap := capability_of(g)) is not None and code_for(cap, archs.cubins, archs.ptx) is None
    ]
    if not bad:
        return None
    named = "; ".join(
        f"GPU {g.get('index', '?')} ({g.get('name', 'unknown')}, compute capability "
        f"{g.get('compute_capability')})"
        for g in bad
    )
    lines = [
        f"mxperf: the installed MXNet cannot run on {named}.",
        f"{build} ({library}) has {_code(archs.cubins, archs.ptx)}: it runs on compute "
        f"capability {runs_on(archs)}, and every GPU case would fail with MXNet's "
        f"'{NO_KERNEL}'.",
    ]
    caps = sorted({c for g in bad if (c := capability_of(g)) is not None})
    fits = sorted(set.intersection(*(set(wheels_for(c)) for c in caps)))
    if fits:
        wheel = fits[0]
        extra = EXTRAS.get(wheel)
        how = f"pip install 'pytest-mxperf[{extra}]'" if extra else f"pip install {wheel}"
        lines.append(f"{wheel}=={MXNET_VERSION} runs there: {how}.")
    else:
        codes = set(WHEELS.values())
        names = list(WHEELS)
        carry = (
            f"{names[0]} to {names[-1]} all have {_code(*next(iter(codes)))}"
            if len(codes) == 1 and len(names) > 2
            else ", ".join(names) + " have no code for it"
        )
        lines.append(
            f"No MXNet {MXNET_VERSION} wheel runs there ({carry}); only an MXNet compiled "
            f"for compute capability {', '.join(f'{a}.{b}' for a, b in caps)} could."
        )
    good = [g for g in gpus if g not in bad and capability_of(g) is not None]
    hints = ["measure the CPU cases alone: --mxperf-ctx cpu"]
    if good:
        ids = ",".join(g.get("uuid") or g.get("index", "") for g in good)
        hints.insert(0, f"measure on the GPUs it runs on: CUDA_VISIBLE_DEVICES={ids}")
    lines.append("Or " + "; or ".join(hints) + ".")
    return Refusal(tuple(bad), "\n  ".join(lines))


def _code(cubins: frozenset[Capability], ptx: frozenset[Capability]) -> str:
    """``"machine code for sm_50, sm_86 and no PTX"``."""
    sass = ", ".join(f"sm_{a}{b}" for a, b in sorted(cubins)) or "nothing"
    jit = ", ".join(f"compute_{a}{b}" for a, b in sorted(ptx))
    return f"machine code for {sass} and " + (f"PTX for {jit}" if jit else "no PTX")


def gpu_cases_run(ctx: Sequence[str], gpus: Sequence[Mapping[str, str]]) -> bool:
    """Whether GPU cases would run: GPUs are visible and ``--mxperf-ctx`` asks for ``gpu`` or
    is ``auto`` (empty; then a CUDA build picks the GPU, which `check` finds out from the
    library itself instead of importing MXNet)."""
    return bool(gpus) and (not ctx or "gpu" in ctx)


def check(
    ctx: Sequence[str],
    gpus: Sequence[Mapping[str, str]],
    *,
    library: Path | None = None,
    read: Callable[[Path], fatbin.CudaArchs | None] | None = None,
    build: Callable[[], str] | None = None,
) -> Refusal | None:
    """The refusal of this run's GPU cases, or None: when no GPU case would run, MXNet is
    not installed or is a CPU build (no fat binary), no visible GPU's compute capability is
    known, or the library cannot be read (then MXNet itself reports what it finds)."""
    if not gpu_cases_run(ctx, gpus) or all(capability_of(g) is None for g in gpus):
        return None
    library = library or cudalibs.mxnet_library()
    if library is None:
        return None
    try:
        archs = (read or fatbin.read_archs)(library)
    except (OSError, ValueError):
        return None
    if archs is None:
        return None
    return refusal(gpus, archs, build=(build or installed_build)(), library=library)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_mxperf.system.gpuarch [LIBRARY]``: the code of the installed
    ``libmxnet.so`` (or LIBRARY) and, for each visible GPU, what of it runs there. Exit 1 when
    a GPU has none (or the library cannot be read), else 0."""
    from pytest_mxperf.system import nvml

    args = list(sys.argv[1:] if argv is None else argv)
    library = Path(args[0]) if args else cudalibs.mxnet_library()
    if library is None:
        print("MXNet is not installed here (no libmxnet.so found)")
        return 1
    try:
        archs = fatbin.read_archs(library)
    except (OSError, ValueError) as exc:
        print(f"{library}: cannot be read: {exc}")
        return 1
    if archs is None:
        print(f"{library}: no GPU code (a CPU build)")
        return 0
    print(
        f"{library}: {_code(archs.cubins, archs.ptx)} in {archs.containers} fat binaries; "
        f"runs on compute capability {runs_on(archs)}"
    )
    status = 0
    for row in nvml.visible_gpus(os.environ):
        capability = capability_of(row)
        if capability is None:
            verdict = "compute capability unknown (no NVML): not checked"
        else:
            code = code_for(capability, archs.cubins, archs.ptx)
            verdict = f"runs {code}" if code else f"nothing runs there ('{NO_KERNEL}')"
            status = status or (0 if code else 1)
        name = f"GPU {row.get('index', '?')} {row.get('name', '')}"
        print(f"{name} ({row.get('compute_capability', '?')}): {verdict}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
