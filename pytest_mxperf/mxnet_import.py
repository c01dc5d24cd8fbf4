"""The one place that imports mxnet: pip CUDA libraries preloaded first, a clear error if not.

Called only when a benchmark runs (the back end, the FLOP probe, data-parallel ranks), so a plain
``pytest`` run never imports mxnet.
"""

from __future__ import annotations

import warnings
from typing import Any


class MXNetUnavailable(RuntimeError):
    """MXNet cannot be imported here; the message says why and what to install."""


def import_mxnet() -> Any:
    """``import mxnet`` with one clear message instead of a ctypes traceback."""
    from pytest_mxperf import cuda

    if cuda.cuda_build():  # the CPU build pays one metadata lookup, nothing more
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


def _missing_library(exc: BaseException) -> MXNetUnavailable:
    from pytest_mxperf.cuda import explain_import_error

    return MXNetUnavailable(explain_import_error(exc))
