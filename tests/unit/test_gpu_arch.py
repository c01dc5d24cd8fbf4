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
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf.system import cudalibs, fatbin, gpuarch

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


def lib_with(tmp_path: Path, section: bytes) -> Path:
    """A library whose ``.nv_fatbin`` is ``section`` (the fixture, rewritten)."""
    return make_elf(tmp_path / "custom" / "libmxnet.so", {".nv_fatbin": section})


def gpu(index: int, name: str, capability: str, uuid: str | None = None) -> dict[str, str]:
    """A row as `pytest_mxperf.system.nvml.visible_gpus` gives it from NVML."""
    return {
        "index": str(index),
        "uuid": uuid or f"GPU-{index:04d}-aaaa",
        "name": name,
        "compute_capability": capability,
    }


H100 = gpu(0, "NVIDIA H100 80GB HBM3", "9.0")
A100 = gpu(0, "NVIDIA A100-SXM4-40GB", "8.0")


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


# which GPUs run --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("capability", "code"),
    [
        ((3, 7), None),  # K80
        ((5, 2), "sm_50"),  # M60
        ((6, 1), "sm_60"),  # P4, P40
        ((7, 0), "sm_70"),  # V100
        ((7, 5), "sm_70"),  # T4
        ((8, 0), "sm_80"),  # A100
        ((8, 6), "sm_86"),  # A10, RTX 30
        ((8, 7), "sm_86"),  # Jetson Orin
        ((8, 9), "sm_86"),  # L4, RTX 40
        ((9, 0), None),  # H100
        ((10, 0), None),  # B200
        ((12, 0), None),  # RTX 50
    ],
)
def test_code_for_each_gpu_on_mxnet_cu112(
    cu112_lib: Path, capability: tuple[int, int], code: str | None
) -> None:
    archs = fatbin.read_archs(cu112_lib)
    assert archs is not None
    assert gpuarch.code_for(capability, archs.cubins, archs.ptx) == code


@pytest.mark.parametrize(
    ("capability", "runs"),
    [((8, 6), False), ((8, 7), True), ((8, 9), True), ((9, 0), False), ((7, 5), False)],
)
def test_a_cubin_runs_on_the_same_major_at_a_minor_as_high(
    tmp_path: Path, capability: tuple[int, int], runs: bool
) -> None:
    """An sm_87-only build (the fixture's sm_86 cubins renamed, the rest dropped)."""
    archs = fatbin.read_archs(
        lib_with(
            tmp_path, rewrite(cu112_fatbin(), lambda kind, arch: (2, 87) if arch == 86 else None)
        )
    )
    assert archs is not None and archs.cubins == {(8, 7)}
    assert (gpuarch.code_for(capability, archs.cubins, archs.ptx) is not None) == runs


def test_ptx_is_jit_compiled_for_newer_gpus_only(tmp_path: Path) -> None:
    """The fixture with its sm_80 cubins turned into compute_80 PTX: Hopper runs it through
    the driver's JIT; a V100 (7.0) still runs its sm_70 cubin; a build with PTX only for 8.0
    does not run on 7.0."""
    ptx80 = rewrite(cu112_fatbin(), lambda kind, arch: (1, arch) if arch == 80 else (kind, arch))
    archs = fatbin.read_archs(lib_with(tmp_path, ptx80))
    assert archs is not None
    assert gpuarch.code_for((9, 0), archs.cubins, archs.ptx) == (
        "compute_80 (PTX, JIT-compiled by the driver)"
    )
    assert gpuarch.code_for((7, 0), archs.cubins, archs.ptx) == "sm_70"
    assert gpuarch.code_for((7, 0), frozenset(), archs.ptx) is None
    assert gpuarch.check((), [H100], library=lib_with(tmp_path, ptx80)) is None


def test_h100_is_refused_with_one_message(cu112_lib: Path) -> None:
    refusal = gpuarch.check(("gpu",), [H100], library=cu112_lib, build=lambda: "mxnet-cu112 1.9.1")
    assert refusal is not None
    assert refusal.gpus == (H100,)
    message = refusal.message
    assert "GPU 0 (NVIDIA H100 80GB HBM3, compute capability 9.0)" in message
    assert f"mxnet-cu112 1.9.1 ({cu112_lib})" in message
    assert "has machine code for sm_50, sm_60, sm_70, sm_80, sm_86 and no PTX" in message
    assert "it runs on compute capability 5.x, 6.x, 7.x and 8.x" in message
    assert "no kernel image is available for execution on the device" in message
    assert "No MXNet 1.9.1 wheel runs there (mxnet-cu112 to mxnet-cu117 all have machine" in message
    assert "only an MXNet compiled for compute capability 9.0 could" in message
    assert "CUDA_VISIBLE_DEVICES" not in message  # no other GPU to offer
    assert "--mxperf-ctx cpu" in message


@pytest.mark.parametrize(
    "row",
    [
        A100,
        gpu(0, "Tesla V100-SXM2-16GB", "7.0"),
        gpu(0, "Tesla T4", "7.5"),
        gpu(0, "NVIDIA L4", "8.9"),
        gpu(0, "Orin", "8.7"),
    ],
)
def test_gpus_with_kernels_pass(cu112_lib: Path, row: dict[str, str]) -> None:
    assert gpuarch.check(("gpu",), [row], library=cu112_lib) is None


def test_only_the_gpus_without_kernels_are_named(cu112_lib: Path) -> None:
    """An A100 beside an H100: the H100 is named and the A100 offered."""
    h100 = gpu(1, "NVIDIA H100 80GB HBM3", "9.0")
    refusal = gpuarch.check((), [A100, h100], library=cu112_lib)
    assert refusal is not None and refusal.gpus == (h100,)
    assert "GPU 1 (NVIDIA H100 80GB HBM3" in refusal.message
    assert "A100" not in refusal.message
    assert f"CUDA_VISIBLE_DEVICES={A100['uuid']}" in refusal.message


def test_a_wheel_that_runs_is_offered(tmp_path: Path) -> None:
    """A build from source with sm_80 only, on a V100: mxnet-cu112's wheel has sm_70."""
    sm80 = rewrite(cu112_fatbin(), lambda kind, arch: (kind, arch) if arch == 80 else None)
    v100 = gpu(0, "Tesla V100-SXM2-16GB", "7.0")
    refusal = gpuarch.check(("gpu",), [v100], library=lib_with(tmp_path, sm80))
    assert refusal is not None
    assert "mxnet-cu112==1.9.1 runs there: pip install 'pytest-mxperf[cu112]'" in refusal.message


def test_the_table_of_wheels_matches_the_fixture(cu112_lib: Path) -> None:
    archs = fatbin.read_archs(cu112_lib)
    assert archs is not None
    assert gpuarch.WHEELS["mxnet-cu112"] == (archs.cubins, archs.ptx)
    assert gpuarch.wheels_for((9, 0)) == []
    assert gpuarch.wheels_for((8, 0)) == list(gpuarch.WHEELS)


# when the check runs ---------------------------------------------------------------------------
def no_read(path: Path) -> Any:
    raise AssertionError(f"{path} must not be read")


@pytest.mark.parametrize(
    ("ctx", "gpus"),
    [
        (("cpu",), [H100]),  # CPU cases only
        ((), []),  # auto, no GPU
        (("gpu",), []),  # asked for, no GPU: the cases skip
        (("gpu",), [{"index": "0", "uuid": "GPU-1", "name": "H100"}]),  # nvidia-smi: no capability
    ],
)
def test_no_library_read_without_gpu_cases(
    ctx: tuple[str, ...], gpus: list[dict[str, str]]
) -> None:
    assert gpuarch.check(ctx, gpus, library=Path("/nonexistent"), read=no_read) is None


def test_a_cpu_build_is_not_checked(tmp_path: Path) -> None:
    cpu_lib = make_elf(tmp_path / "libmxnet.so", {".text": b"\xc3"})
    assert gpuarch.check((), [H100], library=cpu_lib) is None


def test_an_unreadable_library_is_left_to_mxnet(tmp_path: Path) -> None:
    broken = tmp_path / "libmxnet.so"
    broken.write_bytes(b"garbage")
    assert gpuarch.check(("gpu",), [H100], library=broken) is None
    assert gpuarch.check(("gpu",), [H100], library=tmp_path / "missing.so") is None


# in the plugin ---------------------------------------------------------------------------------
def fake_pynvml(name: str, capability: tuple[int, int]) -> types.ModuleType:
    """nvidia-ml-py's pynvml with one GPU (the calls pytest_mxperf.system.nvml makes)."""
    mod = types.ModuleType("pynvml")
    calls: dict[str, Callable[..., Any]] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: name,
        "nvmlDeviceGetUUID": lambda h: "GPU-1234-abcd",
        "nvmlDeviceGetCudaComputeCapability": lambda h: capability,
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=80 * 1024**3),
    }
    for attr, call in calls.items():
        setattr(mod, attr, call)
    return mod


@pytest.fixture
def plugin_env(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cu112_lib: Path
) -> Callable[[str, tuple[int, int]], None]:
    """A pytester run that sees one GPU through a fake NVML and mxnet-cu112's libmxnet.so."""
    monkeypatch.setattr(cudalibs, "mxnet_library", lambda: cu112_lib)
    monkeypatch.setattr(gpuarch, "installed_build", lambda: "mxnet-cu112 1.9.1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("PYTEST_MXPERF_CTX", raising=False)
    pytester.makepyfile("def test_plain():\n    pass\n")

    def see(name: str, capability: tuple[int, int]) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(name, capability))

    return see


@pytest.mark.parametrize("ctx", ["gpu", "auto", "cpu,gpu"])
def test_plugin_refuses_an_h100_run_before_any_case(
    pytester: pytest.Pytester, plugin_env: Callable[[str, tuple[int, int]], None], ctx: str
) -> None:
    plugin_env("NVIDIA H100 80GB HBM3", (9, 0))
    result = pytester.runpytest_inprocess("--mxperf", f"--mxperf-ctx={ctx}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: mxperf: the installed MXNet cannot run on GPU 0 (NVIDIA H100 80GB HBM3,"
            " compute capability 9.0).",
            "  mxnet-cu112 1.9.1 (*libmxnet.so) has machine code for sm_50, sm_60, sm_70,"
            " sm_80, sm_86 and no PTX: it runs on compute capability 5.x, 6.x, 7.x and 8.x,*",
            "  No MXNet 1.9.1 wheel runs there*",
            "  Or measure the CPU cases alone: --mxperf-ctx cpu.",
        ]
    )
    assert "passed" not in result.stdout.str()  # stopped before any case ran


def test_plugin_runs_on_an_a100(
    pytester: pytest.Pytester, plugin_env: Callable[[str, tuple[int, int]], None]
) -> None:
    plugin_env("NVIDIA A100-SXM4-40GB", (8, 0))
    pytester.runpytest_inprocess("--mxperf", "--mxperf-ctx=gpu").assert_outcomes(passed=1)


def test_plugin_cpu_run_reads_no_library(
    pytester: pytest.Pytester,
    plugin_env: Callable[[str, tuple[int, int]], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugin_env("NVIDIA H100 80GB HBM3", (9, 0))
    monkeypatch.setattr(fatbin, "read_archs", no_read)
    pytester.runpytest_inprocess("--mxperf", "--mxperf-ctx=cpu").assert_outcomes(passed=1)


def test_command_line_names_what_runs_where(
    cu112_lib: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m pytest_mxperf.system.gpuarch``: the build's code, then each visible GPU."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml("NVIDIA H100 80GB HBM3", (9, 0)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpuarch.main([str(cu112_lib)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{cu112_lib}: machine code for sm_50, sm_60, sm_70, sm_80, sm_86 and no PTX in 4 fat"
        " binaries; runs on compute capability 5.x, 6.x, 7.x and 8.x",
        "GPU 0 NVIDIA H100 80GB HBM3 (9.0): nothing runs there ('no kernel image is available"
        " for execution on the device')",
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml("NVIDIA A100-SXM4-40GB", (8, 0)))
    assert gpuarch.main([str(cu112_lib)]) == 0
    assert (
        capsys.readouterr().out.splitlines()[-1] == "GPU 0 NVIDIA A100-SXM4-40GB (8.0): runs sm_80"
    )
    cpu_lib = make_elf(cu112_lib.parent / "cpu" / "libmxnet.so", {".text": b"\xc3"})
    assert gpuarch.main([str(cpu_lib)]) == 0
    assert capsys.readouterr().out == f"{cpu_lib}: no GPU code (a CPU build)\n"
