"""The fat binary reader (`pytest_mxperf.system.fatbin`, issue #29, item 6) on the real
headers of ``mxnet-cu112==1.9.1``'s ``libmxnet.so`` (the fixture: fatbin_data.py), rewritten
ones, and files that are no such library."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from fatbin_data import CU112, cu112_fatbin, cu112_library, lib_with, make_elf, rewrite

from pytest_mxperf.system import cudalibs, fatbin


@pytest.fixture
def cu112_lib(tmp_path: Path) -> Path:
    """An ELF shared object whose ``.nv_fatbin`` is the real mxnet-cu112 fixture."""
    return cu112_library(tmp_path)


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
