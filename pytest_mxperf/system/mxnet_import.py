"""The one place that imports mxnet: pip CUDA libraries preloaded first (`system.cuda`),
a clear error if not.

Called only when a benchmark runs (the back end, the FLOP probe, data-parallel ranks), so a plain
``pytest`` run never imports mxnet. ``python -m pytest_mxperf.system.mxnet_import`` shows what was
preloaded from where and whether MXNet imports.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import warnings
from typing import Any

from pytest_mxperf.system import cuda, cudalibs, mxnet_env


class MXNetUnavailable(RuntimeError):
    """MXNet cannot be imported here; the message says why and what to install."""


def import_mxnet() -> Any:
    """``import mxnet`` with one clear message instead of a ctypes traceback (or an abort on an
    integer variable MXNet cannot read: `pytest_mxperf.system.mxnet_env`)."""
    problem = mxnet_env.env_problem(os.environ)
    if problem is not None:  # the plugin refuses it at configure; ranks and scripts come here
        raise MXNetUnavailable(problem)
    if cudalibs.cuda_build():  # the CPU build pays one metadata lookup, nothing more
        cuda.preload()
    try:
        with warnings.catch_warnings():
            # MXNet 1.9's own imports use distutils' LooseVersion; not the user's concern.
            warnings.simplefilter("ignore", DeprecationWarning)
            import mxnet
    except ImportError as exc:
        if "libcu" in str(exc) or "libnccl" in str(exc) or "libnv" in str(exc):
            raise _missing_library(exc) from None
        raise MXNetUnavailable(
            "MXNet is not installed: pip install 'pytest-mxperf[cpu]' (or '[cu112]' for the "
            f"CUDA 11.2 build) ({exc})"
        ) from None
    except OSError as exc:
        raise _missing_library(exc) from None
    except AttributeError as exc:
        import numpy

        raise MXNetUnavailable(
            f"MXNet 1.9 cannot be imported with numpy {numpy.__version__} ({exc}); "
            "install numpy<1.24"
        ) from None
    return mxnet


def load_library() -> ctypes.CDLL:
    """MXNet's C library alone, the file ``import mxnet`` loads (its own ``libinfo`` finds it,
    ``MXNET_LIBRARY_PATH`` included) after the same checks, without the Python side: for a
    process that only calls a few of its C functions (a data-parallel case's scheduler, a
    server that sums), a tenth of a second of CPU where ``import mxnet`` takes over one."""
    problem = mxnet_env.env_problem(os.environ)
    if problem is not None:
        raise MXNetUnavailable(problem)
    if cudalibs.cuda_build():
        cuda.preload()
    found = importlib.util.find_spec("mxnet")  # finds the package without importing it
    if found is None or not found.submodule_search_locations:
        raise MXNetUnavailable("MXNet is not installed: pip install 'pytest-mxperf[cpu]'")
    folder = next(iter(found.submodule_search_locations))
    info_spec = importlib.util.spec_from_file_location(
        "_mxperf_mxnet_libinfo", os.path.join(folder, "libinfo.py")
    )
    assert info_spec is not None and info_spec.loader is not None
    libinfo = importlib.util.module_from_spec(info_spec)
    info_spec.loader.exec_module(libinfo)
    try:
        lib = ctypes.CDLL(libinfo.find_lib_path()[0], ctypes.RTLD_LOCAL)
    except OSError as exc:
        raise _missing_library(exc) from None
    lib.MXGetLastError.restype = ctypes.c_char_p
    return lib


def _missing_library(exc: BaseException) -> MXNetUnavailable:
    return MXNetUnavailable(cuda.explain_import_error(exc))


def main() -> int:
    """``python -m pytest_mxperf.system.mxnet_import``: what preload does here, then whether MXNet
    imports."""
    print(cuda.preload().describe())
    try:
        mx = import_mxnet()
    except MXNetUnavailable as exc:
        print(f"import mxnet: {exc}")
        return 1
    print(f"import mxnet: ok, MXNet {mx.__version__}, {mx.context.num_gpus()} GPU(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
