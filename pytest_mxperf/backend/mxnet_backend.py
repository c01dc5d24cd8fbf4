"""The MXNet back end, used only when a benchmark runs (mxnet comes from `mxnet_import`).

It turns what a user hands the ``mxperf`` fixture (a Gluon HybridBlock or Block, an
``mx.sym.Symbol``, exported ``prefix-symbol.json`` + ``prefix-NNNN.params`` files, or a plain
callable) into a step function on synthetic device-resident data, benchmark_score style.
"""

from __future__ import annotations

import ctypes
import os
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_mxperf.backend import models as mxmodels
from pytest_mxperf.measuring.protocol import (
    ModelFileError,
    ModelTypeError,
    Prepared,
    PrepareSpec,
    SpecError,
    looks_like_oom,
)
from pytest_mxperf.system.mxnet_import import import_mxnet

if TYPE_CHECKING:
    from pytest_mxperf.measuring.dp_result import DataParallelResult
    from pytest_mxperf.measuring.dp_scaling import DataParallelSpec


class MXNetBackend:
    """Measures with MXNet: ``sync`` is ``mx.nd.waitall``, the clock ``time.perf_counter``."""

    clock = staticmethod(time.perf_counter)

    def __init__(self) -> None:
        self.mx = import_mxnet()

    # devices ---------------------------------------------------------------------------------
    def sync(self) -> None:
        self.mx.nd.waitall()

    def num_gpus(self) -> int:
        try:
            return int(self.mx.context.num_gpus())
        except Exception:
            return 0

    def context(self, kind: str, index: int = 0) -> Any:
        return self.mx.gpu(index) if kind == "gpu" else self.mx.cpu()

    @staticmethod
    def describe(ctx: Any) -> tuple[str, int]:
        return str(ctx.device_type).replace("cpu_pinned", "cpu"), int(ctx.device_id)

    def is_oom(self, exc: BaseException) -> bool:
        return looks_like_oom(exc, self.mx.base.MXNetError)

    def software(self) -> dict[str, Any]:
        import numpy

        mx = self.mx
        try:
            features = sorted(f.name for f in mx.runtime.Features().values() if f.enabled)
        except Exception:
            features = []
        record: dict[str, Any] = {
            "mxnet": mx.__version__,
            "mxnet_features": ",".join(features),
            "numpy": numpy.__version__,
            "python": platform.python_version(),
        }
        if "CUDA" in features:
            record.update(cuda_versions())
        return record

    # models ----------------------------------------------------------------------------------
    def prepare(self, model: Any, spec: PrepareSpec) -> Prepared:
        """Turn a Gluon block, a Symbol, an exported model prefix or a callable into a step."""
        mx = self.mx
        if isinstance(model, mx.sym.Symbol):
            return mxmodels.prepare_symbol(mx, model, spec)
        if isinstance(model, (str, os.PathLike)):
            model = self.load_exported(model, spec.ctx, spec.data_name)
        if isinstance(model, mx.gluon.Block):
            return mxmodels.prepare_gluon(mx, model, spec)
        if callable(model):
            if spec.items_per_call is None:
                raise SpecError("a plain callable needs items_per_call= (images per call)")
            last: dict[str, Any] = {}
            seen = {"result": False}

            def call() -> None:
                out = last["out"] = model()
                if out is not None:
                    seen["result"] = True

            def check() -> str | None:
                out = last.get("out")
                if mxmodels.is_nd(out):
                    return mxmodels.finite_message("the callable's result", [out])
                return None

            return Prepared(
                call,
                int(spec.items_per_call),
                check,
                info={"form": "callable"},
                computed=lambda: seen["result"],
            )
        raise ModelTypeError(
            f"cannot benchmark a {type(model).__name__}: pass a Gluon Block, an mx.sym.Symbol, "
            "an exported model prefix or a callable with items_per_call="
        )

    def data_parallel(self, model: Any, spec: DataParallelSpec) -> DataParallelResult:
        """In this process for ``local``/``device``/``nccl``; launched ranks for dist kvstores."""
        from pytest_mxperf.distributed.local import run_in_process

        if spec.distributed:
            from pytest_mxperf.distributed.launch import run_distributed

            return run_distributed(spec)
        return run_in_process(spec, model)

    def peak_gflops(self, ctx: Any, dtype: str) -> float | None:
        """Square matrix products for about a second (`flops.peak_gflops`)."""
        from pytest_mxperf.measuring import flops

        return flops.peak_gflops(self.mx, ctx, dtype)

    def calibration_net(self) -> Any:
        """The calibration probe's network (`pytest_mxperf.measuring.calibrate`): 8 Conv2D of
        32 channels with ReLU, global pooling, a 10-way Dense; random weights."""
        nn = self.mx.gluon.nn
        net = nn.HybridSequential()
        for _ in range(8):
            net.add(nn.Conv2D(32, 3, padding=1, activation="relu"))
        net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
        return net

    def load_exported(self, prefix: str | os.PathLike[str], ctx: Any, data_name: str) -> Any:
        """Load ``prefix-symbol.json`` + the newest ``prefix-NNNN.params`` as a SymbolBlock."""
        text = str(prefix)
        if text.endswith("-symbol.json"):
            text = text[: -len("-symbol.json")]
        sym_file = Path(f"{text}-symbol.json")
        if not sym_file.is_file():
            raise ModelFileError(f"exported model: {sym_file} does not exist")
        stem = Path(text).name
        params = sorted(sym_file.parent.glob(f"{stem}-[0-9][0-9][0-9][0-9].params"))
        if not params:
            raise ModelFileError(f"exported model: no {text}-NNNN.params next to {sym_file}")
        mx = self.mx
        with mxmodels.warnings_quiet():
            return mx.gluon.SymbolBlock.imports(
                str(sym_file), [data_name], str(params[-1]), ctx=ctx
            )


def cuda_versions() -> dict[str, Any]:
    """CUDA runtime/driver, cuDNN and NCCL versions through ctypes (MXNet has no API for them)."""
    found: dict[str, Any] = {}

    def call(sonames: tuple[str, ...], fn: str, by_ref: bool) -> int | None:
        for soname in sonames:
            try:
                lib = ctypes.CDLL(soname)
                func = getattr(lib, fn)
            except (OSError, AttributeError):
                continue
            if by_ref:
                value = ctypes.c_int()
                return value.value if func(ctypes.byref(value)) == 0 else None
            func.restype = ctypes.c_size_t
            return int(func())
        return None

    found["cuda_runtime"] = call(
        ("libcudart.so.11.0", "libcudart.so"), "cudaRuntimeGetVersion", True
    )
    found["cuda_driver"] = call(("libcuda.so.1", "libcuda.so"), "cuDriverGetVersion", True)
    found["cudnn"] = call(("libcudnn.so.8", "libcudnn.so"), "cudnnGetVersion", False)
    found["nccl"] = call(("libnccl.so.2", "libnccl.so"), "ncclGetVersion", True)
    return {k: v for k, v in found.items() if v is not None}
