"""The real ``.nv_fatbin`` headers of ``mxnet-cu112==1.9.1``'s ``libmxnet.so`` for the tests
of the fat binary reader and the GPU check (test_fatbin.py, test_gpu_arch.py): the fixture's
bytes, minimal ELF files holding them, and the fixture rewritten.

The fixture ``data/mxnet-cu112-1.9.1-nv_fatbin.hex`` holds the ``.nv_fatbin`` headers of 4 of
the 198 containers of ``mxnet/libmxnet.so`` in
``mxnet_cu112-1.9.1-py3-none-manylinux2014_x86_64.whl`` from PyPI (sha256
70137a60eef49241b1137231bbd6bdeedbb0eca83e136f864ead36998814bfe5; libmxnet.so sha256
0698ea1e5a9c871c174b1106ce8415c92acc75b651ebf0fe1853948e3984aaed), written by
``scripts/fatbin_fixture.py`` (its docstring has the commands): every container and entry
header byte for byte, each entry's payload cut to its first 16 bytes (the entry's two payload
sizes, bytes 8-23, set to 16; the container's size to what remains). The whole library has 198
containers, each with cubins for sm_50, sm_60, sm_70, sm_80 and sm_86 and no PTX; CUDA's own
``cuobjdump --list-elf`` / ``--list-ptx`` (13.5.37, from the nvidia-cuda-cuobjdump wheel) say the
same of it: 990 cubins, 198 of each arch, "No PTX file found". The cu113..cu117 1.9.1 wheels
read the same (197 containers each).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from pathlib import Path

FIXTURE = Path(__file__).parent / "data" / "mxnet-cu112-1.9.1-nv_fatbin.hex"
CU112 = frozenset({(5, 0), (6, 0), (7, 0), (8, 0), (8, 6)})


def cu112_fatbin() -> bytes:
    """The fixture's bytes: a ``.nv_fatbin`` section of 4 of mxnet-cu112's containers."""
    lines = FIXTURE.read_text(encoding="ascii").splitlines()
    return bytes.fromhex("".join(line for line in lines if not line.startswith("#")))


def make_elf(path: Path, sections: Mapping[str, bytes]) -> Path:
    """A minimal ELF64 little-endian file holding ``sections`` (PROGBITS) and the section
    name table: all a section lookup reads. (``readelf -S`` lists such a file as expected.)"""
    names = b"\0"
    name_at = {}
    for name in (*sections, ".shstrtab"):
        name_at[name] = len(names)
        names += name.encode() + b"\0"
    body = b""
    placed = []
    for name, data in (*sections.items(), (".shstrtab", names)):
        placed.append((name, 64 + len(body), len(data)))
        body += data + bytes(-len(data) % 8)
    shoff = 64 + len(body)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(placed) + 1, len(placed)
    )
    table = bytes(64)  # section 0: SHN_UNDEF
    for name, offset, size in placed:
        sh_type = 3 if name == ".shstrtab" else 1  # SHT_STRTAB, SHT_PROGBITS
        table += struct.pack("<IIQQQQIIQQ", name_at[name], sh_type, 2, 0, offset, size, 0, 0, 8, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + body + table)
    return path


def rewrite(section: bytes, change: Callable[[int, int], tuple[int, int] | None]) -> bytes:
    """``section`` with each entry's (kind, arch) replaced by ``change(kind, arch)``, or the
    entry dropped where it returns None; container sizes follow. Walks the layout as the
    fixture is documented (container header 16 bytes; an entry's header size at +4, padded
    payload size at +8, arch at +28), not with the module under test."""
    out = b""
    pos = 0
    while pos < len(section):
        magic, version, header_size, fat_size = struct.unpack_from("<IHHQ", section, pos)
        body = b""
        at, end = pos + header_size, pos + header_size + fat_size
        while at < end:
            kind, _, entry_size, padded = struct.unpack_from("<HHIQ", section, at)
            (arch,) = struct.unpack_from("<I", section, at + 28)
            entry = bytearray(section[at : at + entry_size + padded])
            changed = change(kind, arch)
            if changed is not None:
                struct.pack_into("<H", entry, 0, changed[0])
                struct.pack_into("<I", entry, 28, changed[1])
                body += entry
            at += entry_size + padded
        out += struct.pack("<IHHQ", magic, version, header_size, len(body)) + body
        pos = end
    return out


def lib_with(tmp_path: Path, section: bytes) -> Path:
    """A library whose ``.nv_fatbin`` is ``section`` (the fixture, rewritten)."""
    return make_elf(tmp_path / "custom" / "libmxnet.so", {".nv_fatbin": section})


def cu112_library(tmp_path: Path) -> Path:
    """An ELF shared object whose ``.nv_fatbin`` is the real mxnet-cu112 fixture."""
    return make_elf(tmp_path / "libmxnet.so", {".text": b"\xc3", ".nv_fatbin": cu112_fatbin()})
