"""Which GPU architectures a CUDA build of MXNet carries code for, read from ``libmxnet.so``
itself: no CUDA, no driver, no ``cuobjdump``.

Why: a GPU can run a kernel only if the library holds machine code (a *cubin*, SASS) for its
architecture family or PTX the driver can JIT-compile for it; otherwise every kernel launch
fails with "no kernel image is available for execution on the device". ``mxnet-cu112==1.9.1``
and its cu113..cu117 siblings carry cubins for sm_50, sm_60, sm_70, sm_80 and sm_86 and no PTX,
so an H100 (compute capability 9.0) cannot run them. Reading the archs from the installed
library (rather than trusting a table) keeps the check right for any build a user installs.

Where nvcc puts the code: in an ELF section ``.nv_fatbin`` (code the CUDA runtime registers at
load time) and, for relocatable device code, ``__nv_relfatbin``. Each holds fat binaries one
after another, little-endian. The container header and the code kinds are those of the CUDA
toolkit's ``fatbinary.h``; the entry layout is not in a public header and is read as the open
readers decode it (vosen/ZLUDA ``dark_api/src/fatbin.rs``, n-eiling/cuda-fatbin-decompression),
checked on all six MXNet 1.9.1 CUDA wheels: every container's entries end exactly where its
header says, and ``cuobjdump --list-elf`` lists the same cubins.

- container header, 16 bytes: ``u32 magic`` (``0xBA55ED50``), ``u16 version`` (1),
  ``u16 header_size`` (16), ``u64 fat_size`` (bytes of entries that follow the header);
- then entries, each an entry header followed by its payload: ``u16 kind`` (1 = PTX,
  2 = ELF cubin, 8 = NVVM IR), ``u16 version`` (0x0101), ``u32 header_size`` (64; more for
  newer archs), ``u64 padded_payload_size`` (the next entry starts ``header_size +
  padded_payload_size`` after this one), ``u64 payload_size``, ``u16 code version minor``,
  ``u16 code version major``, ``u32 arch`` (``10 * major + minor`` of the compute capability:
  50, 86, 90, 100, 120) at byte 28, then ``u64 flags`` at byte 40 (64-bit, Linux,
  compressed) and the uncompressed size.

Only headers are read (via ``mmap``): ``libmxnet.so`` is 850 MB and its ``.nv_fatbin`` 530 MB,
yet its 198 containers' headers are read in milliseconds (about 0.07 s from a cold page cache).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_CUBIN = 2
#: The ELF sections nvcc writes fat binaries into.
SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header_size, fat_size
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header_size, padded_payload_size
_ENTRY_ARCH_AT = 28
_ENTRY_MIN = 32  # an entry header shorter than this cannot hold its arch


class FatbinError(ValueError):
    """The file is not ELF, or a fat binary in it is not laid out as expected."""


@dataclass(frozen=True)
class Entry:
    """One code object of a fat binary: its kind (1 PTX, 2 cubin) and SM arch number."""

    kind: int
    arch: int  # 86 for sm_86 / compute_86

    @property
    def capability(self) -> tuple[int, int]:
        """The compute capability the code is for: ``(8, 6)`` for sm_86."""
        return divmod(self.arch, 10)


@dataclass(frozen=True)
class CudaArchs:
    """What a library's fat binaries hold: the compute capabilities with machine code (cubins)
    and those with PTX, as ``(major, minor)`` tuples, and how many containers were read."""

    cubins: frozenset[tuple[int, int]]
    ptx: frozenset[tuple[int, int]]
    containers: int

    def describe(self) -> str:
        """``"sm_50, sm_60, sm_70, sm_80, sm_86, no PTX"`` (how ``nvcc``/``cuobjdump`` name
        them)."""
        sass = ", ".join(f"sm_{a}{b}" for a, b in sorted(self.cubins)) or "no machine code"
        ptx = ", ".join(f"compute_{a}{b}" for a, b in sorted(self.ptx))
        return f"{sass}, " + (f"PTX {ptx}" if ptx else "no PTX")


# ELF --------------------------------------------------------------------------------------------
def elf_sections(data: bytes | mmap.mmap) -> dict[str, tuple[int, int]]:
    """Section name -> (file offset, size) from an ELF file's section table (32 or 64 bit,
    either byte order). Sections without file contents (``SHT_NOBITS``) are left out."""
    if len(data) < 52 or data[:4] != b"\x7fELF":
        raise FatbinError("not an ELF file")
    wide = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    try:
        if wide:
            (shoff,) = struct.unpack_from(end + "Q", data, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
            shdr = struct.Struct(end + "IIQQQQIIQQ")
        else:
            (shoff,) = struct.unpack_from(end + "I", data, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
            shdr = struct.Struct(end + "IIIIIIIIII")
        rows = [shdr.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        if not rows or shstrndx >= len(rows):
            return {}
        names_at, names_size = rows[shstrndx][4], rows[shstrndx][5]
        names = bytes(data[names_at : names_at + names_size])
        found: dict[str, tuple[int, int]] = {}
        for name_at, sh_type, *_, offset, size, _link, _info, _align, _entsize in rows:
            if sh_type == 8 or name_at >= len(names):  # SHT_NOBITS: nothing in the file
                continue
            name = names[name_at : names.find(b"\0", name_at)].decode("latin-1")
            found.setdefault(name, (offset, size))
        return found
    except struct.error as exc:
        raise FatbinError(f"truncated ELF section table ({exc})") from None


# fat binaries -----------------------------------------------------------------------------------
def containers(
    data: bytes | mmap.mmap, start: int = 0, stop: int | None = None
) -> Iterator[tuple[Entry, ...]]:
    """The entries of each fat binary stored back to back in ``data[start:stop]``.

    Bytes between containers that are not a container header (zero padding some linkers add)
    are skipped up to the next magic, on the 8-byte alignment containers keep. An entry or
    container that runs past its bounds raises `FatbinError`.
    """
    stop = len(data) if stop is None else stop
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = start
    while pos + _CONTAINER.size <= stop:
        found, header_size, fat_size = _container(data, pos)
        if not found:
            nxt = data.find(magic, pos + 1, stop)
            while nxt != -1 and (nxt - start) % 8:
                nxt = data.find(magic, nxt + 1, stop)
            if nxt == -1:
                return
            pos = nxt
            continue
        body, end = pos + header_size, pos + header_size + fat_size
        if end > stop:
            raise FatbinError(
                f"fat binary at {pos:#x} runs past its section ({end:#x} > {stop:#x})"
            )
        found_entries, at = [], body
        while at + _ENTRY_MIN <= end:
            kind, _version, entry_size, padded = _ENTRY.unpack_from(data, at)
            if entry_size < _ENTRY_MIN or at + entry_size + padded > end:
                raise FatbinError(f"bad fat binary entry at {at:#x} (header {entry_size} bytes)")
            (arch,) = struct.unpack_from("<I", data, at + _ENTRY_ARCH_AT)
            found_entries.append(Entry(kind, arch))
            at += entry_size + padded
        yield tuple(found_entries)
        pos = end


def _container(data: bytes | mmap.mmap, pos: int) -> tuple[bool, int, int]:
    magic, version, header_size, fat_size = _CONTAINER.unpack_from(data, pos)
    if magic != FATBIN_MAGIC:
        return False, 0, 0
    if header_size < _CONTAINER.size:
        raise FatbinError(f"fat binary at {pos:#x}: header size {header_size}, version {version}")
    return True, header_size, fat_size


def archs_of(data: bytes | mmap.mmap) -> CudaArchs | None:
    """The archs of an ELF image's fat binaries, or None when it has none (a CPU build)."""
    sections = elf_sections(data)
    cubins: set[tuple[int, int]] = set()
    ptx: set[tuple[int, int]] = set()
    count = 0
    present = [sections[name] for name in SECTIONS if name in sections]
    if not present:
        return None
    for offset, size in present:
        if offset + size > len(data):
            raise FatbinError(f"section at {offset:#x} runs past the end of the file")
        for container in containers(data, offset, offset + size):
            count += 1
            for entry in container:
                if entry.kind == KIND_CUBIN:
                    cubins.add(entry.capability)
                elif entry.kind == KIND_PTX:
                    ptx.add(entry.capability)
    return CudaArchs(frozenset(cubins), frozenset(ptx), count)


def read_archs(path: str | os.PathLike[str]) -> CudaArchs | None:
    """The CUDA archs in the shared library at ``path`` (``libmxnet.so``), or None when it has
    no fat binary (the CPU build). Raises `FatbinError` (a ValueError) for a file that is not
    ELF or whose fat binaries are not laid out as expected, ``OSError`` if it cannot be read."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise FatbinError(f"{path} is empty")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if hasattr(data, "madvise") and hasattr(mmap, "MADV_RANDOM"):
                # Only a few bytes of each container are read, scattered over a large library:
                # without this the kernel's read-ahead pulls in most of the file.
                data.madvise(mmap.MADV_RANDOM)
            return archs_of(data)
