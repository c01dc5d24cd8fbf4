"""The MXNet back end: the only module that imports mxnet, and only when a benchmark runs.

It turns what a user hands the ``mxperf`` fixture (a Gluon HybridBlock or Block, an
``mx.sym.Symbol``, exported ``prefix-symbol.json`` + ``prefix-NNNN.params`` files, or a plain
callable) into a step function on synthetic device-resident data, benchmark_score style.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

MODES = ("inference", "training", "forward_backward")
_OOM_PATTERNS = ("out of memory", "bad_alloc", "memory allocation failed", "cudamalloc")


def looks_like_oom(exc: BaseException, error_type: type[BaseException]) -> bool:
    """Whether ``exc`` is an out-of-memory failure (a result, as in the published tables)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, error_type) and any(p in text for p in _OOM_PATTERNS)


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


@dataclass
class Prepared:
    """A ready-to-time step and what the engine needs to know about it."""

    step: Callable[[], object]
    items_per_step: int
    check: Callable[[], str | None] = lambda: None
    info: dict[str, Any] = field(default_factory=dict)


def _finite_message(label: str, arrays: list[Any]) -> str | None:
    import numpy as np

    for arr in arrays:
        values = arr.asnumpy() if hasattr(arr, "asnumpy") else np.asarray(arr)
        if not np.isfinite(values.astype("float64")).all():
            bad = int((~np.isfinite(values.astype("float64"))).sum())
            return f"{label} contains NaN/inf ({bad} of {values.size} values)"
    return None


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
    def prepare(
        self,
        model: Any,
        *,
        mode: str,
        batch_size: int,
        ctx: Any,
        dtype: str = "float32",
        input_shape: tuple[int, ...] = (3, 224, 224),
        items_per_call: int | None = None,
        loss: Any = None,
        optimizer: Any = "sgd",
        optimizer_params: dict[str, Any] | None = None,
        num_classes: int | None = None,
        data_name: str = "data",
        hybridize: bool = True,
    ) -> Prepared:
        mx = self.mx
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
        if isinstance(model, mx.sym.Symbol):
            return self._prepare_symbol(
                model,
                mode,
                batch_size,
                ctx,
                dtype,
                tuple(input_shape),
                optimizer,
                optimizer_params,
                data_name,
            )
        if isinstance(model, (str, os.PathLike)):
            model = self.load_exported(model, ctx, data_name)
        if isinstance(model, mx.gluon.Block):
            return self._prepare_gluon(
                model,
                mode,
                batch_size,
                ctx,
                dtype,
                tuple(input_shape),
                loss,
                optimizer,
                optimizer_params,
                num_classes,
                hybridize,
            )
        if callable(model):
            if items_per_call is None:
                raise ValueError("a plain callable needs items_per_call= (images per call)")
            last: dict[str, Any] = {}

            def call() -> None:
                last["out"] = model()

            def check() -> str | None:
                out = last.get("out")
                return _finite_message("the callable's result", [out]) if _is_nd(out) else None

            return Prepared(call, int(items_per_call), check, info={"form": "callable"})
        raise TypeError(
            f"cannot benchmark a {type(model).__name__}: pass a Gluon Block, an mx.sym.Symbol, "
            "an exported model prefix or a callable with items_per_call="
        )

    def load_exported(self, prefix: str | os.PathLike[str], ctx: Any, data_name: str) -> Any:
        """Load ``prefix-symbol.json`` + the newest ``prefix-NNNN.params`` as a SymbolBlock."""
        text = str(prefix)
        if text.endswith("-symbol.json"):
            text = text[: -len("-symbol.json")]
        sym_file = Path(f"{text}-symbol.json")
        if not sym_file.is_file():
            raise FileNotFoundError(f"exported model: {sym_file} does not exist")
        stem = Path(text).name
        params = sorted(sym_file.parent.glob(f"{stem}-[0-9][0-9][0-9][0-9].params"))
        if not params:
            raise FileNotFoundError(f"exported model: no {text}-NNNN.params next to {sym_file}")
        mx = self.mx
        with _warnings_quiet():
            return mx.gluon.SymbolBlock.imports(
                str(sym_file), [data_name], str(params[-1]), ctx=ctx
            )

    def _data(self, shape: tuple[int, ...], ctx: Any, dtype: str) -> Any:
        return self.mx.nd.random.uniform(-1, 1, shape=shape, ctx=ctx).astype(dtype)

    def _labels(self, batch: int, classes: int, ctx: Any, dtype: str) -> Any:
        import numpy as np

        rng = np.random.RandomState(0)
        return self.mx.nd.array(rng.randint(0, classes, size=(batch,)), ctx=ctx, dtype=dtype)

    def _optimizer_params(
        self, optimizer: Any, params: dict[str, Any] | None, dtype: str
    ) -> dict[str, Any] | None:
        """SGD defaults as in train_imagenet (lr 0.01, momentum 0.9 for sgd/nag); an
        Optimizer instance carries its own settings."""
        if not isinstance(optimizer, str):
            return None
        merged: dict[str, Any] = {"learning_rate": 0.01}
        if optimizer.lower() in ("sgd", "nag"):
            merged["momentum"] = 0.9
        if dtype == "float16":
            merged["multi_precision"] = True  # fp32 master weights, as train_imagenet does
        merged.update(params or {})
        return merged

    def _prepare_gluon(
        self,
        net: Any,
        mode: str,
        batch: int,
        ctx: Any,
        dtype: str,
        shape: tuple[int, ...],
        loss: Any,
        optimizer: Any,
        optimizer_params: dict[str, Any] | None,
        num_classes: int | None,
        hybridize: bool,
    ) -> Prepared:
        mx = self.mx
        autograd = mx.autograd
        params = net.collect_params()
        for p in params.values():
            try:
                p.list_ctx()
            except RuntimeError:  # not initialized yet
                p.initialize(ctx=ctx, default_init=mx.init.Xavier(magnitude=2))
        params.reset_ctx(ctx)
        if dtype != "float32":
            net.cast(dtype)
        x = self._data((batch, *shape), ctx, dtype)
        hybrid = hybridize and isinstance(net, mx.gluon.HybridBlock)
        if hybrid:
            net.hybridize(static_alloc=True, static_shape=True)
        last: dict[str, Any] = {}
        info = {"form": "gluon-hybrid" if hybrid else "gluon-imperative", "input": [batch, *shape]}

        if mode == "inference":

            def infer() -> None:
                last["out"] = net(x)

            def check() -> str | None:
                return _finite_message("model output", _outputs(last.get("out")))

            return Prepared(infer, batch, check, info=info)

        out = net(x)  # deferred init + output shape for the labels
        classes = num_classes or int(_outputs(out)[0].shape[-1])
        y = self._labels(batch, classes, ctx, dtype)
        loss_fn = loss or mx.gluon.loss.SoftmaxCrossEntropyLoss()
        trainer = None
        if mode == "training":
            trainer = mx.gluon.Trainer(
                params,
                optimizer,
                self._optimizer_params(optimizer, optimizer_params, dtype),
                kvstore=None,
            )

        def train() -> None:
            with autograd.record():
                out = net(x)
                value = loss_fn(out, y)
            value.backward()
            if trainer is not None:
                trainer.step(batch)
            last["out"], last["loss"] = out, value

        def check_train() -> str | None:
            return _finite_message("training loss", [last["loss"]]) or _finite_message(
                "model output", _outputs(last.get("out"))
            )

        return Prepared(train, batch, check_train, info=info)

    def _prepare_symbol(
        self,
        sym: Any,
        mode: str,
        batch: int,
        ctx: Any,
        dtype: str,
        shape: tuple[int, ...],
        optimizer: Any,
        optimizer_params: dict[str, Any] | None,
        data_name: str,
    ) -> Prepared:
        """Bind like benchmark_score: a Module, Xavier(magnitude=2) params, data on the device."""
        mx = self.mx
        args = sym.list_arguments()
        if data_name not in args:
            raise ValueError(f"the symbol has no input named {data_name!r} (arguments: {args[:5]})")
        labels = [a for a in args if a.endswith("_label")]
        training = mode != "inference"
        if training and not labels:
            sym = mx.sym.SoftmaxOutput(sym, name="softmax")  # a loss head to train against
            labels = ["softmax_label"]
        data_desc = mx.io.DataDesc(data_name, (batch, *shape), dtype=dtype)
        _, out_shapes, _ = sym.infer_shape(**{data_name: (batch, *shape)})
        classes = int(out_shapes[0][-1]) if out_shapes and out_shapes[0] else 1
        mod = mx.mod.Module(
            symbol=sym, context=ctx, data_names=[data_name], label_names=labels or None
        )
        label_shapes = [(name, (batch,)) for name in labels] if labels else None
        with _warnings_quiet():
            mod.bind(
                data_shapes=[data_desc],
                label_shapes=label_shapes,
                for_training=training,
                inputs_need_grad=False,
            )
            mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
        if mode == "training":
            mod.init_optimizer(
                kvstore=None,
                optimizer=optimizer,
                optimizer_params=self._optimizer_params(optimizer, optimizer_params, dtype),
            )
        data = [self._data((batch, *shape), ctx, dtype)]
        label = [self._labels(batch, classes, ctx, "float32") for _ in labels]
        db = mx.io.DataBatch(data, label)
        info = {"form": "symbol-module", "input": [batch, *shape]}

        if mode == "inference":

            def step() -> None:
                mod.forward(db, is_train=False)
        elif mode == "training":

            def step() -> None:
                mod.forward(db, is_train=True)
                mod.backward()
                mod.update()
        else:

            def step() -> None:
                mod.forward_backward(db)

        def check() -> str | None:
            return _finite_message("model output", mod.get_outputs())

        return Prepared(step, batch, check, info=info)


def _is_nd(value: Any) -> bool:
    return hasattr(value, "asnumpy") and hasattr(value, "wait_to_read")


def _outputs(out: Any) -> list[Any]:
    if out is None:
        return []
    if isinstance(out, (list, tuple)):
        return [o for item in out for o in _outputs(item)]
    return [out]


@contextlib.contextmanager
def _warnings_quiet() -> Iterator[None]:
    """MXNet warns about harmless label-shape mismatches on bind; keep -W error runs clean."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


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
