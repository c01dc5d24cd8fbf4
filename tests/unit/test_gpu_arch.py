"""Which GPUs the installed MXNet build can run on (issue #29, item 6): the fat binary reader
(`pytest_mxperf.system.fatbin`) on the real headers of ``mxnet-cu112==1.9.1``'s
``libmxnet.so``, and the check that refuses a run before any GPU case
(`pytest_mxperf.system.gpuarch`), with fake NVML facts.

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

import pytest

from pytest_mxperf.system import cudalibs, fatbin

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


@pytest.fixture
def cu112_lib(tmp_path: Path) -> Path:
    """An ELF shared object whose ``.nv_fatbin`` is the real mxnet-cu112 fixture."""
    return make_elf(tmp_path / "libmxnet.so", {".text": b"\xc3", ".nv_fatbin": cu112_fatbin()})


def lib_with(tmp_path: Path, section: bytes, name: str = ".nv_fatbin") -> Path:
    return make_elf(tmp_path / "custom" / "libmxnet.so", {name: section})


# the reader ------------------------------------------------------------------------------------
def test_reads_the_archs_of_mxnet_cu112(cu112_lib: Path) -> None:
    archs = fatbin.read_archs(cu112_lib)
    assert archs is not None
    assert (archs.cubins, archs.ptx, archs.containers) == (CU112, frozenset(), 4)
    assert archs.describe() == "sm_50, sm_60, sm_70, sm_80, sm_86, no PTX"


def test_the_fixture_is_the_documented_layout() -> None:
    """What the reader relies on, checked on the real bytes: container magic 0xBA55ED50,
    version 1, 16-byte header; entries of kind 2 (cubin), version 0x0101, 64-byte headers, the
    arch at byte 28; flags 0x2011 (64-bit, Linux, compressed)."""
    data = cu112_fatbin()
    magic, version, header_size, fat_size = struct.unpack_from("<IHHQ", data, 0)
    assert (magic, version, header_size) == (0xBA55ED50, 1, 16)
    kind, entry_version, entry_size, padded = struct.unpack_from("<HHIQ", data, 16)
    assert (kind, entry_version, entry_size, padded) == (2, 0x0101, 64, 16)
    assert struct.unpack_from("<I", data, 16 + 28) == (50,)
    assert struct.unpack_from("<Q", data, 16 + 40) == (0x2011,)
    assert fat_size == 5 * (64 + 16)


def test_entries_of_each_container() -> None:
    found = list(fatbin.containers(cu112_fatbin()))
    assert len(found) == 4
    assert all(
        [(e.kind, e.arch) for e in c] == [(2, a) for a in (50, 60, 70, 80, 86)] for c in found
    )


def test_ptx_entries_are_told_apart(tmp_path: Path) -> None:
    ptx80 = rewrite(cu112_fatbin(), lambda kind, arch: (1, arch) if arch == 80 else (kind, arch))
    archs = fatbin.read_archs(lib_with(tmp_path, ptx80))
    assert archs is not None
    assert archs.cubins == CU112 - {(8, 0)}
    assert archs.ptx == {(8, 0)}
    assert archs.describe() == "sm_50, sm_60, sm_70, sm_86, PTX compute_80"


def test_padding_between_containers_is_skipped(tmp_path: Path) -> None:
    data = cu112_fatbin()
    first = 16 + struct.unpack_from("<Q", data, 8)[0]
    padded = data[:first] + bytes(24) + data[first:]
    archs = fatbin.read_archs(lib_with(tmp_path, padded))
    assert archs is not None and (archs.cubins, archs.containers) == (CU112, 4)


def test_relocatable_fatbin_section_is_read(tmp_path: Path) -> None:
    sm90 = rewrite(cu112_fatbin(), lambda kind, arch: (kind, 90) if arch == 86 else None)
    lib = make_elf(tmp_path / "libx.so", {".nv_fatbin": cu112_fatbin(), "__nv_relfatbin": sm90})
    archs = fatbin.read_archs(lib)
    assert archs is not None and archs.cubins == CU112 | {(9, 0)} and archs.containers == 8


def test_a_cpu_build_has_no_fatbin(tmp_path: Path) -> None:
    assert fatbin.read_archs(make_elf(tmp_path / "libmxnet.so", {".text": b"\xc3"})) is None


def test_the_installed_cpu_mxnet_has_no_fatbin() -> None:
    """The real ``libmxnet.so`` of this environment's MXNet (the CPU build, mxnet==1.9.1)."""
    library = cudalibs.mxnet_library()
    if library is None or cudalibs.cuda_build() is not None:
        pytest.skip("needs the CPU build of MXNet installed")
    assert fatbin.read_archs(library) is None


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"not an ELF file at all, just text" * 4, "not an ELF file"),
        (b"", "empty"),
    ],
)
def test_not_elf(tmp_path: Path, content: bytes, error: str) -> None:
    path = tmp_path / "libmxnet.so"
    path.write_bytes(content)
    with pytest.raises(fatbin.FatbinError, match=error):
        fatbin.read_archs(path)


def test_a_container_past_its_section_is_an_error(tmp_path: Path) -> None:
    data = bytearray(cu112_fatbin())
    struct.pack_into("<Q", data, 8, 1 << 20)
    with pytest.raises(fatbin.FatbinError, match="runs past its section"):
        fatbin.read_archs(lib_with(tmp_path, bytes(data)))
