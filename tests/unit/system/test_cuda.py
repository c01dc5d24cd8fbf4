"""pytest_mxperf.system.cuda: ELF reading, load order, strategy choice and messages, on fake trees."""

from __future__ import annotations

import ctypes
import importlib.metadata
import struct
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf.system import cuda, cudalibs

# NEEDED entries of NVIDIA's cu11 wheels as `readelf -d` shows them (system libraries left out).
WHEELS: dict[str, dict[str, tuple[str, ...]]] = {
    "cuda_runtime": {"libcudart.so.11.0": (), "libOpenCL.so.1": ()},
    "cublas": {
        "libcublas.so.11": ("libcublasLt.so.11",),
        "libcublasLt.so.11": (),
        "libnvblas.so.11": ("libcublas.so.11",),
    },
    "cudnn": {
        "libcudnn.so.8": (),
        "libcudnn_ops_infer.so.8": (),
        "libcudnn_ops_train.so.8": ("libcudnn_ops_infer.so.8",),
        "libcudnn_cnn_infer.so.8": ("libcudnn_ops_infer.so.8", "libz.so.1"),
        "libcudnn_cnn_train.so.8": (
            "libcudnn_ops_infer.so.8",
            "libcudnn_ops_train.so.8",
            "libcudnn_cnn_infer.so.8",
        ),
    },
    "cuda_nvrtc": {"libnvrtc.so.11.2": (), "libnvrtc-builtins.so.11.8": ()},
    "cusolver": {"libcusolver.so.11": ("libcublas.so.11", "libcublasLt.so.11")},
    "cufft": {"libcufft.so.10": (), "libcufftw.so.10": ("libcufft.so.10",)},
    "curand": {"libcurand.so.10": ()},
    "nccl": {"libnccl.so.2": ()},
    "nvtx": {"libnvToolsExt.so.1": ()},
}
MXNET_NEEDS = ("libdl.so.2", "libcuda.so.1", *cudalibs.MXNET_CU112_NEEDS, "libstdc++.so.6")


def make_elf(path: Path, soname: str | None, needed: tuple[str, ...] = ()) -> Path:
    """A minimal ELF64 file with a .dynstr and a .dynamic section (all read_dynamic reads)."""
    strtab = b"\0"
    offsets = {}
    for name in ((soname,) if soname else ()) + needed:
        offsets[name] = len(strtab)
        strtab += name.encode() + b"\0"
    dyn = b"".join(struct.pack("<qQ", 1, offsets[n]) for n in needed)
    if soname:
        dyn += struct.pack("<qQ", 14, offsets[soname])
    dyn += struct.pack("<qQ", 0, 0)
    strtab_off = 64
    dyn_off = strtab_off + len(strtab)
    shoff = dyn_off + len(dyn)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 0)
    sections = struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    sections += struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, strtab_off, len(strtab), 0, 0, 1, 0)
    sections += struct.pack("<IIQQQQIIQQ", 0, 6, 0, 0, dyn_off, len(dyn), 1, 0, 8, 16)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + strtab + dyn + sections)
    return path


@pytest.fixture
def nvidia(tmp_path: Path) -> Path:
    """A fake site-packages/nvidia tree with the wheels' sonames and NEEDED entries."""
    root = tmp_path / "site" / "nvidia"
    for wheel, libs in WHEELS.items():
        for soname, needed in libs.items():
            make_elf(root / wheel / "lib" / soname, soname, needed)
    return root


def test_read_dynamic(tmp_path: Path) -> None:
    lib = make_elf(tmp_path / "x.so", "libcusolver.so.11", ("libcublas.so.11", "libc.so.6"))
    assert cudalibs.read_dynamic(lib) == cudalibs.ElfDynamic(
        "libcusolver.so.11", ("libcublas.so.11", "libc.so.6")
    )


def test_read_dynamic_refuses_non_elf(tmp_path: Path) -> None:
    (tmp_path / "x.so").write_text("not a library")
    with pytest.raises(ValueError, match="not an ELF file"):
        cudalibs.read_dynamic(tmp_path / "x.so")


def test_read_dynamic_of_the_libraries_in_this_process() -> None:
    # Real ELF files: libc is mapped into every Python process.
    maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace").splitlines()
    libc = sorted({line.split()[-1] for line in maps if "/libc.so.6" in line or "/libc-" in line})
    assert libc and cudalibs.read_dynamic(libc[0]).soname == "libc.so.6"


def test_load_order_follows_needed_and_loads_plugins_first(nvidia: Path) -> None:
    available = cudalibs.scan(cudalibs.pip_library_dirs([nvidia]))
    needs = {name: cudalibs.read_dynamic(path).needed for name, path in available.items()}
    order = cudalibs.load_order(cudalibs.MXNET_CU112_NEEDS, available, needs)
    pos = {name: i for i, name in enumerate(order)}
    for name in order:
        for dep in needs[name]:
            if dep in available:
                assert pos[dep] < pos[name], f"{dep} must load before {name}"
    assert pos["libcublasLt.so.11"] < pos["libcublas.so.11"] < pos["libcusolver.so.11"]
    for plugin in ("libcudnn_ops_infer.so.8", "libcudnn_cnn_train.so.8"):
        assert pos[plugin] < pos["libcudnn.so.8"]
    assert pos["libnvrtc-builtins.so.11.8"] < pos["libnvrtc.so.11.2"]
    # Nobody asks for these, and loaded globally they would take over BLAS, FFTW and OpenCL.
    assert not {"libnvblas.so.11", "libcufftw.so.10", "libOpenCL.so.1"} & set(order)
    assert set(cudalibs.MXNET_CU112_NEEDS) <= set(order)


def test_load_order_breaks_a_cycle_deterministically() -> None:
    available = {"liba.so.1": Path("a"), "libb.so.1": Path("b")}
    needs = {"liba.so.1": ("libb.so.1",), "libb.so.1": ("liba.so.1",)}
    assert cudalibs.load_order(["liba.so.1"], available, needs) == ["liba.so.1", "libb.so.1"]


@pytest.mark.parametrize(
    ("arg", "env", "expected"),
    [
        (None, {}, ("auto", "default")),
        (None, {"PYTEST_MXPERF_CUDA": "System"}, ("system", "PYTEST_MXPERF_CUDA")),
        ("pip", {"PYTEST_MXPERF_CUDA": "system"}, ("pip", "argument")),
    ],
)
def test_strategy_argument_beats_env_beats_auto(
    arg: str | None, env: dict[str, str], expected: tuple[str, str]
) -> None:
    assert cuda.resolve_strategy(arg, env) == expected


def test_unknown_strategy_names_where_it_came_from() -> None:
    with pytest.raises(ValueError, match=r"PYTEST_MXPERF_CUDA: unknown .* 'conda'.*auto, pip"):
        cuda.resolve_strategy(None, {"PYTEST_MXPERF_CUDA": "conda"})


def system_dir(tmp_path: Path, sonames: tuple[str, ...]) -> dict[str, str]:
    folder = tmp_path / "system-cuda"
    folder.mkdir()
    for name in sonames:
        (folder / name).write_bytes(b"")
    return {"LD_LIBRARY_PATH": f"/nonexistent:{folder}"}


def test_auto_keeps_a_complete_system_install(nvidia: Path, tmp_path: Path) -> None:
    env = system_dir(tmp_path, (*cudalibs.MXNET_CU112_NEEDS, "libcuda.so.1"))
    report, files = cuda.plan(
        env=env,
        pip_dirs=cudalibs.pip_library_dirs([nvidia]),
        required=cudalibs.MXNET_CU112_NEEDS,
        cache={},
    )
    assert (report.used, files) == ("system", [])
    assert report.reason == "the system provides every CUDA library libmxnet.so needs"
    assert report.driver is not None and report.driver.endswith("libcuda.so.1")


def test_auto_uses_the_wheels_when_the_system_install_is_partial(
    nvidia: Path, tmp_path: Path
) -> None:
    # A CUDA 11 runtime in /usr/local/cuda but no cuDNN 8: mixing would pair two installs.
    env = system_dir(tmp_path, ("libcudart.so.11.0",))
    report, files = cuda.plan(
        env=env,
        pip_dirs=cudalibs.pip_library_dirs([nvidia]),
        required=cudalibs.MXNET_CU112_NEEDS,
        cache={},
    )
    assert report.used == "pip"
    assert report.reason.startswith("the system lacks libcublas.so.11, libcudnn.so.8")
    assert dict(files)["libcudart.so.11.0"] == nvidia / "cuda_runtime" / "lib" / "libcudart.so.11.0"
    assert report.driver is None


def test_pip_wins_over_a_complete_system_install_when_asked(nvidia: Path, tmp_path: Path) -> None:
    env = system_dir(tmp_path, cudalibs.MXNET_CU112_NEEDS)
    report, files = cuda.plan(
        "pip",
        env=env,
        pip_dirs=cudalibs.pip_library_dirs([nvidia]),
        required=cudalibs.MXNET_CU112_NEEDS,
        cache={},
    )
    assert (report.used, report.reason) == ("pip", "chosen by argument")
    assert len(files) == 15  # the fake tree: 17 in the real wheels (no cuDNN adv_* here)


def test_system_strategy_loads_nothing(nvidia: Path) -> None:
    report, files = cuda.plan(
        env={"PYTEST_MXPERF_CUDA": "system"},
        pip_dirs=cudalibs.pip_library_dirs([nvidia]),
        required=cudalibs.MXNET_CU112_NEEDS,
        cache={},
    )
    assert (report.used, report.reason, files) == ("system", "chosen by PYTEST_MXPERF_CUDA", [])


def test_nothing_to_load_without_wheels_or_cuda_needs(nvidia: Path) -> None:
    report, _ = cuda.plan(env={}, pip_dirs=[], required=cudalibs.MXNET_CU112_NEEDS, cache={})
    assert report.used == "none" and "pytest-mxperf[cu112]" in report.reason
    report, files = cuda.plan(
        env={}, pip_dirs=cudalibs.pip_library_dirs([nvidia]), required=(), cache={}
    )
    assert (report.used, files) == ("none", [])


def test_required_sonames_come_from_libmxnet(tmp_path: Path) -> None:
    lib = make_elf(tmp_path / "libmxnet.so", "libmxnet.so", MXNET_NEEDS)
    assert cudalibs.required_sonames(lib) == cudalibs.MXNET_CU112_NEEDS  # no driver, no system libs


def test_parse_ldconfig_prefers_64_bit() -> None:
    text = (
        "2 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibz.so.1 (libc6) => /usr/lib32/libz.so.1\n"
        "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n"
    )
    assert cudalibs.parse_ldconfig(text) == {"libz.so.1": "/lib/x86_64-linux-gnu/libz.so.1"}


class Loader:
    """Stands in for ctypes.CDLL: records what is loaded, fails for names in ``broken``."""

    def __init__(self, broken: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, int]] = []
        self.broken = broken

    def __call__(self, path: str, mode: int = 0) -> object:
        self.calls.append((path, mode))
        if Path(path).name in self.broken:
            raise OSError(f"{Path(path).name}: undefined symbol")
        return object()


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, nvidia: Path) -> Loader:
    loader = Loader(broken=("libnccl.so.2",))
    monkeypatch.setattr(cuda, "_done", {})
    monkeypatch.setattr(ctypes, "CDLL", loader)
    monkeypatch.setattr(cudalibs, "pip_library_dirs", lambda: sorted(nvidia.glob("*/lib")))
    monkeypatch.setattr(cudalibs, "required_sonames", lambda: cudalibs.MXNET_CU112_NEEDS)
    monkeypatch.setattr(cudalibs, "ldconfig_cache", dict)
    monkeypatch.delenv("PYTEST_MXPERF_CUDA", raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    return loader


def test_preload_loads_globally_in_order_and_is_idempotent(fresh: Loader) -> None:
    report = cuda.preload()
    assert report.used == "pip"
    assert {mode for _, mode in fresh.calls} == {ctypes.RTLD_GLOBAL}
    names = [Path(p).name for p, _ in fresh.calls]
    assert [n for n in names if n != "libnccl.so.2"] == [n for n, _ in report.loaded]
    assert report.failed == (("libnccl.so.2", "libnccl.so.2: undefined symbol"),)
    assert len(report.loaded) == 14
    calls = len(fresh.calls)
    assert cuda.preload("system") is report  # the libraries cannot be unloaded: first one stands
    assert len(fresh.calls) == calls
    assert "FAILED libnccl.so.2" in report.describe()
    assert cuda.DRIVER_MESSAGE in report.describe()


DRIVER_ERROR = OSError("libcuda.so.1: cannot open shared object file: No such file or directory")


def test_the_driver_message_is_exact() -> None:
    assert cuda.explain_import_error(DRIVER_ERROR) == (
        "the NVIDIA driver (libcuda.so.1) was not found: this machine has no GPU driver"
    )


def test_a_missing_cuda_library_names_its_wheel() -> None:
    exc = OSError("libcudnn.so.8: cannot open shared object file: No such file or directory")
    message = cuda.explain_import_error(exc)
    assert message.startswith("MXNet could not load the shared library libcudnn.so.8: ")
    assert "nvidia-cudnn-cu11" in message and "pytest-mxperf[cpu]" in message


def test_after_a_system_choice_the_message_says_how_to_use_the_wheels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cuda, "_done", {"report": cuda.PreloadReport("system", "system", "x")})
    exc = OSError("libcublasLt.so.11: cannot open shared object file")
    assert "PYTEST_MXPERF_CUDA=pip or auto" in cuda.explain_import_error(exc)


def test_other_failures_are_named() -> None:
    assert cuda.explain_import_error(OSError("libgfortran.so.3: nope")).startswith(
        "MXNet could not load the shared library libgfortran.so.3; on a machine without a GPU"
    )
    assert cuda.explain_import_error(OSError("bad magic")) == (
        "MXNet could not load its shared library (bad magic)"
    )


def test_backend_gives_the_driver_message() -> None:
    from pytest_mxperf.system.mxnet_import import _missing_library

    assert str(_missing_library(DRIVER_ERROR)) == cuda.DRIVER_MESSAGE


def test_cuda_build_is_read_from_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def distribution(name: str) -> Any:
        seen.append(name)
        if name == "mxnet-cu112":
            return object()
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    assert cudalibs.cuda_build() == "mxnet-cu112"
    monkeypatch.setattr(cudalibs, "CUDA_BUILDS", ("mxnet-cu999",))
    assert cudalibs.cuda_build() is None


def test_import_mxnet_preloads_only_for_a_cuda_build(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_mxperf.system import mxnet_import

    calls: list[str | None] = []
    monkeypatch.setitem(sys.modules, "mxnet", types.ModuleType("mxnet"))  # `import mxnet` finds it
    monkeypatch.setattr(cuda, "preload", lambda strategy=None: calls.append(strategy))
    monkeypatch.setattr(cudalibs, "cuda_build", lambda: None)
    mxnet_import.import_mxnet()
    assert calls == []
    monkeypatch.setattr(cudalibs, "cuda_build", lambda: "mxnet-cu112")
    mxnet_import.import_mxnet()
    assert calls == [None]
