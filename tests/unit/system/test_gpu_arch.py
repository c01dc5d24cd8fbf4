"""Which GPUs the installed MXNet build can run on (issue #29, item 6): the check that refuses
a run before any GPU case (`pytest_mxperf.system.gpuarch`), with fake NVML facts, on the real
headers of ``mxnet-cu112==1.9.1``'s ``libmxnet.so`` (fatbin_data.py; the reader of those
headers: test_fatbin.py)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fatbin_data import cu112_fatbin, cu112_library, lib_with, make_elf, rewrite

from pytest_mxperf.system import cudalibs, fatbin, gpuarch


@pytest.fixture
def cu112_lib(tmp_path: Path) -> Path:
    """An ELF shared object whose ``.nv_fatbin`` is the real mxnet-cu112 fixture."""
    return cu112_library(tmp_path)


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
