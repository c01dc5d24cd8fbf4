"""Where the shared libraries of ``mxnet-cu112`` are, without loading any: ELF sonames and
NEEDED entries, NVIDIA's pip wheel folders, the system loader's search, the order to load them in,
and what the loader is missing now (like ``ldd``). `pytest_mxperf.system.cuda` decides and loads."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import re
import struct
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DRIVER_SONAME = "libcuda.so.1"
#: Distributions of MXNet whose CUDA libraries NVIDIA's cu11 wheels provide.
CUDA_BUILDS = ("mxnet-cu112",)
#: What ``libmxnet.so`` of mxnet-cu112 1.9.1 needs besides the driver (``readelf -d``); used
#: only when ``libmxnet.so`` itself cannot be read.
MXNET_CU112_NEEDS = (
    "libcudart.so.11.0",
    "libcublas.so.11",
    "libcudnn.so.8",
    "libnccl.so.2",
    "libnvrtc.so.11.2",
    "libcurand.so.10",
    "libcufft.so.10",
    "libcusolver.so.11",
    "libnvToolsExt.so.1",
)
CUDA_PREFIXES = ("libcu", "libnccl", "libnv")
_DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")


# ELF ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ElfDynamic:
    """The dynamic-section facts the loader uses: this library's soname and what it needs."""

    soname: str | None
    needed: tuple[str, ...]


def read_dynamic(path: str | os.PathLike[str]) -> ElfDynamic:
    """``DT_SONAME`` and ``DT_NEEDED`` of an ELF shared library, read from its section table.

    Only the headers are read (``libmxnet.so`` is 850 MB). Raises ``ValueError`` for a file
    that is not ELF.
    """
    with open(path, "rb") as fh:
        ident = fh.read(16)
        if ident[:4] != b"\x7fELF":
            raise ValueError(f"{path} is not an ELF file")
        wide = ident[4] == 2
        end = "<" if ident[5] == 1 else ">"
        if wide:
            fh.seek(0x28)
            (shoff,) = struct.unpack(end + "Q", fh.read(8))
            fh.seek(0x3A)
        else:
            fh.seek(0x20)
            (shoff,) = struct.unpack(end + "I", fh.read(4))
            fh.seek(0x2E)
        shentsize, shnum, _ = struct.unpack(end + "HHH", fh.read(6))
        shdr = end + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
        sections = []
        for i in range(shnum):
            fh.seek(shoff + i * shentsize)
            fields = struct.unpack(shdr, fh.read(struct.calcsize(shdr)))
            # sh_type, sh_offset, sh_size, sh_link
            sections.append((fields[1], fields[4], fields[5], fields[6]))
        for sh_type, offset, size, link in sections:
            if sh_type != 6:  # SHT_DYNAMIC
                continue
            fh.seek(sections[link][1])
            strtab = fh.read(sections[link][2])
            fh.seek(offset)
            raw = fh.read(size)
            entry = end + ("qQ" if wide else "iI")
            step = struct.calcsize(entry)
            soname, needed = None, []
            for pos in range(0, len(raw) - step + 1, step):
                tag, value = struct.unpack_from(entry, raw, pos)
                if tag == 0:  # DT_NULL
                    break
                if tag in (1, 14):  # DT_NEEDED, DT_SONAME
                    name = strtab[value : strtab.index(b"\0", value)].decode()
                    if tag == 1:
                        needed.append(name)
                    else:
                        soname = name
            return ElfDynamic(soname, tuple(needed))
    return ElfDynamic(None, ())


# where the libraries are -----------------------------------------------------------------------
def pip_library_dirs(roots: Iterable[str | os.PathLike[str]] | None = None) -> list[Path]:
    """The ``nvidia/*/lib`` folders of NVIDIA's pip wheels (``roots``: the ``nvidia`` folders;
    default: every ``nvidia`` namespace package on ``sys.path``)."""
    if roots is None:
        spec = importlib.util.find_spec("nvidia")
        roots = list(spec.submodule_search_locations or []) if spec else []
    dirs: list[Path] = []
    for root in roots:
        dirs += sorted(p for p in Path(root).glob("*/lib") if p.is_dir())
    return dirs


def scan(dirs: Iterable[Path]) -> dict[str, Path]:
    """Soname -> file of the shared libraries in ``dirs`` (first folder wins)."""
    found: dict[str, Path] = {}
    for folder in dirs:
        for path in sorted(folder.iterdir()):
            if ".so" not in path.name or not path.is_file():
                continue
            try:
                soname = read_dynamic(path).soname or path.name
            except (OSError, ValueError, struct.error):
                continue
            found.setdefault(soname, path)
    return found


def mxnet_library() -> Path | None:
    """``libmxnet.so`` of the installed MXNet, found without importing it."""
    spec = importlib.util.find_spec("mxnet")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / "libmxnet.so"
        if candidate.is_file():
            return candidate
    return None


def cuda_build() -> str | None:
    """The installed MXNet CUDA distribution this module serves (``mxnet-cu112``), or None.

    Read from package metadata, so the CPU build pays a metadata lookup and nothing else.
    """
    for name in CUDA_BUILDS:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return name
    return None


def required_sonames(libmxnet: Path | None = None) -> tuple[str, ...]:
    """The CUDA sonames ``libmxnet.so`` needs, driver excluded."""
    libmxnet = libmxnet or mxnet_library()
    needed: Sequence[str] = MXNET_CU112_NEEDS
    if libmxnet is not None:
        with contextlib.suppress(OSError, ValueError, struct.error):
            needed = read_dynamic(libmxnet).needed
    return tuple(n for n in needed if n.startswith(CUDA_PREFIXES) and n != DRIVER_SONAME)


def ldconfig_cache() -> dict[str, str]:
    """Soname -> path from ``ldconfig -p`` (the system loader's cache); empty if unavailable."""
    for exe in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            out = subprocess.run(
                [exe, "-p"], capture_output=True, text=True, timeout=10, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        return parse_ldconfig(out)
    return {}


def parse_ldconfig(text: str) -> dict[str, str]:
    """Soname -> path from ``ldconfig -p`` output, 64-bit entries first."""
    rows = re.findall(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$", text, re.MULTILINE)
    cache: dict[str, str] = {}
    for name, _flags, path in sorted(rows, key=lambda row: "64" not in row[1]):
        cache.setdefault(name, path)
    return cache


def find_system(
    soname: str, env: Mapping[str, str], cache: Mapping[str, str] | None = None
) -> str | None:
    """Where the system loader would find ``soname`` (LD_LIBRARY_PATH, cache, default dirs)."""
    for folder in env.get("LD_LIBRARY_PATH", "").split(":"):
        if folder and os.path.isfile(os.path.join(folder, soname)):
            return os.path.join(folder, soname)
    if cache is not None and soname in cache:
        return cache[soname]
    for folder in _DEFAULT_DIRS:
        if os.path.isfile(os.path.join(folder, soname)):
            return os.path.join(folder, soname)
    return None


# ordering --------------------------------------------------------------------------------------
def load_order(
    roots: Iterable[str], available: Mapping[str, Path], needs: Mapping[str, Sequence[str]]
) -> list[str]:
    """Sonames to load, dependencies first: the closure of ``roots`` over ``needs`` within
    ``available``, plus the plug-ins a root ``dlopen``\\ s (``libcudnn_*`` of ``libcudnn``,
    ``libnvrtc-builtins`` of ``libnvrtc``), which are loaded before their root.

    Plug-ins are loaded too because ``dlopen`` searches ``LD_LIBRARY_PATH`` before a library's
    RUNPATH: a different cuDNN 8 there would otherwise pair its sub-libraries with ours.
    Libraries nobody asks for (``libnvblas``, ``libcufftw``, ``libOpenCL``) are left alone:
    loaded globally they would take over BLAS, FFTW and OpenCL symbols.
    """
    edges: dict[str, set[str]] = {}

    def plugins(soname: str) -> set[str]:
        stem = soname.split(".so")[0]
        return {s for s in available if s.startswith((stem + "_", stem + "-"))}

    todo = [r for r in roots if r in available]
    while todo:
        name = todo.pop()
        if name in edges:
            continue
        deps = {n for n in needs.get(name, ()) if n in available} | plugins(name)
        edges[name] = deps
        todo += sorted(deps)
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(edges):
        ready = sorted(n for n, deps in edges.items() if n not in placed and deps <= placed)
        if not ready:  # a cycle (none in NVIDIA's wheels): break it by name, deterministically
            ready = [min(n for n in edges if n not in placed)]
        order += ready
        placed.update(ready)
    return order
