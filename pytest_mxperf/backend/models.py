"""Steps on synthetic device-resident data for Gluon blocks and Symbols, benchmark_score style.

Part of the MXNet back end: every function takes the imported ``mx`` module, so nothing here
imports MXNet by itself.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

from pytest_mxperf.backend import tasks
from pytest_mxperf.config.casekey import AMP_TARGETS
from pytest_mxperf.measuring.flops import macs_or_none
from pytest_mxperf.measuring.protocol import Prepared, PrepareSpec, SpecError


@contextlib.contextmanager
def warnings_quiet() -> Iterator[None]:
    """MXNet warns about harmless label-shape mismatches on bind; keep -W error runs clean."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def is_nd(value: Any) -> bool:
    return hasattr(value, "asnumpy") and hasattr(value, "wait_to_read")


def outputs(out: Any) -> list[Any]:
    """The arrays of a model output, flattened out of nested lists and tuples."""
    if out is None:
        return []
    if isinstance(out, (list, tuple)):
        return [o for item in out for o in outputs(item)]
    return [out]


def finite_message(label: str, arrays: list[Any]) -> str | None:
    """``None`` when every value is finite, else what is wrong (NaN/inf count)."""
    for arr in arrays:
        bad = size = 0
        for values in _host_chunks(arr):
            size += values.size
            bad += values.size - _count_finite(values)
        if bad:
            return f"{label} contains NaN/inf ({bad} of {size} values)"
    return None


#: Bytes of an output copied to the host at once by the NaN/inf check: a whole copy of a large
#: batch's output (and a float64 one before it) could itself run out of memory after the case
#: had been measured, turning a measured point into an out-of-memory one.
CHECK_CHUNK_BYTES = 1 << 24


def _host_chunks(arr: Any) -> Iterator[Any]:
    import numpy as np

    if not hasattr(arr, "asnumpy"):
        yield np.asarray(arr)
        return
    shape = tuple(arr.shape)
    row_bytes = 4 * int(np.prod(shape[1:], dtype=np.int64)) if shape else 4
    if not shape or shape[0] * row_bytes <= CHECK_CHUNK_BYTES:
        yield arr.asnumpy()
        return
    rows = max(1, CHECK_CHUNK_BYTES // max(row_bytes, 1))
    for first in range(0, shape[0], rows):
        yield arr[first : first + rows].asnumpy()  # a slice of the first axis is a view


def _count_finite(values: Any) -> int:
    import numpy as np

    if values.dtype.kind not in "fiub":
        values = values.astype("float32")  # e.g. bfloat16, which numpy has no type for
    return int(np.count_nonzero(np.isfinite(values)))


def _data(mx: Any, shape: tuple[int, ...], ctx: Any, dtype: str) -> Any:
    return mx.nd.random.uniform(-1, 1, shape=shape, ctx=ctx).astype(dtype)


def _labels(mx: Any, batch: int, classes: int, ctx: Any, dtype: str) -> Any:
    import numpy as np

    rng = np.random.RandomState(0)
    return mx.nd.array(rng.randint(0, classes, size=(batch,)), ctx=ctx, dtype=dtype)


def optimizer_params(spec: PrepareSpec) -> dict[str, Any] | None:
    """SGD defaults as in train_imagenet (lr 0.01, momentum 0.9 for sgd/nag), the task's where
    it has its own (`tasks.OPTIMIZER_DEFAULTS`); an Optimizer instance carries its own settings."""
    if not isinstance(spec.optimizer, str):
        return None
    merged: dict[str, Any] = {"learning_rate": 0.01}
    if spec.optimizer.lower() in ("sgd", "nag"):
        merged["momentum"] = 0.9
    merged.update(tasks.OPTIMIZER_DEFAULTS.get(spec.task, {}))
    if spec.dtype == "float16":
        merged["multi_precision"] = True  # fp32 master weights, as train_imagenet does
    merged.update(spec.optimizer_params or {})
    return merged


def prepare_gluon(mx: Any, net: Any, spec: PrepareSpec) -> Prepared:
    """A Gluon block: initialized with Xavier(magnitude=2) where needed, hybridized with static
    allocation when it is a HybridBlock, on one batch of random data resident on the device."""
    ctx, batch = spec.ctx, spec.batch_size
    params = net.collect_params()
    for p in params.values():
        try:
            p.list_ctx()
        except RuntimeError:  # not initialized yet
            p.initialize(ctx=ctx, default_init=mx.init.Xavier(magnitude=2))
    params.reset_ctx(ctx)
    amp_target = AMP_TARGETS.get(spec.dtype)
    if amp_target is None and spec.dtype != "float32":
        net.cast(spec.dtype)
    # Traced with a symbol once, before hybridizing: the graph, not the cached op.
    shapes = tasks.input_shapes(spec)
    macs = macs_or_none(mx, net, shapes[0], spec.data_name) if len(shapes) == 1 else None
    data_dtype = "float32" if amp_target else spec.dtype
    xs = [_data(mx, (batch, *shape), ctx, data_dtype) for shape in tasks.input_shapes(spec)]
    if amp_target is not None:
        net = amp_block(mx, net, xs[0], amp_target, spec)
    hybrid = spec.hybridize and isinstance(net, mx.gluon.HybridBlock)
    if hybrid:
        net.hybridize(static_alloc=True, static_shape=True)
    last: dict[str, Any] = {}
    info: dict[str, Any] = {
        "form": "gluon-hybrid" if hybrid else "gluon-imperative",
        "input": [[batch, *x.shape[1:]] for x in xs] if len(xs) > 1 else [batch, *xs[0].shape[1:]],
    }

    if spec.mode == "inference":

        def infer() -> None:
            last["out"] = net(*xs)

        def check() -> str | None:
            return finite_message("model output", outputs(last.get("out")))

        return Prepared(infer, batch, check, info=info, macs_per_image=macs)

    return _gluon_training(mx, net, params, xs, spec, info, macs)


def _gluon_training(
    mx: Any,
    net: Any,
    params: Any,
    xs: list[Any],
    spec: PrepareSpec,
    info: dict[str, Any],
    macs: int | None,
) -> Prepared:
    """`prepare_gluon`'s training and forward-backward steps: labels and a loss by task."""
    autograd, batch = mx.autograd, spec.batch_size
    last: dict[str, Any] = {}
    with autograd.train_mode():  # deferred init; training-mode outputs (SSD: anchors too)
        first = outputs(net(*xs))
    setup = tasks.training(mx, first, spec)
    tasks.trial(mx, first, setup, spec)
    labels, loss_fn = setup.labels, setup.loss
    info["task"] = setup.describe
    info["labels"] = [list(y.shape) for y in labels]
    trainer = None
    if spec.mode == "training":
        trainer = mx.gluon.Trainer(params, spec.optimizer, optimizer_params(spec), kvstore=None)

    def train() -> None:
        with autograd.record():
            out = outputs(net(*xs))
            value = outputs(loss_fn(*out, *labels))
        autograd.backward(value)
        if trainer is not None:
            trainer.step(batch)
        last["out"], last["loss"] = out, value

    def check_train() -> str | None:
        return finite_message("training loss", last["loss"]) or finite_message(
            "model output", last.get("out", [])
        )

    return Prepared(train, batch, check_train, info=info, macs_per_image=macs)


def amp_block(mx: Any, net: Any, x: Any, target: str, spec: PrepareSpec) -> Any:
    """Inference in mixed precision as MXNet's AMP tutorial does it: the float32 block,
    hybridized and run once, converted by ``mxnet.contrib.amp.convert_hybrid_block`` (cast
    layers around the operators AMP lists for ``target``; inputs stay float32)."""
    from mxnet.contrib import amp

    if spec.mode != "inference" or not isinstance(net, mx.gluon.HybridBlock):
        raise SpecError(
            f"dtype={spec.dtype!r} runs inference of a HybridBlock only (AMP training needs "
            "amp.init() before the network is built, which would change every later case)"
        )
    net.hybridize()
    net(x).wait_to_read()
    # The conversion re-imports the graph as a SymbolBlock and infers parameter types before it
    # knows the input's ("Cannot decide type ... data: None"): harmless, but a warnings-as-errors
    # setting (pytest's filterwarnings) would turn it into a failed case.
    with warnings_quiet():
        return amp.convert_hybrid_block(net, target_dtype=target, ctx=spec.ctx)


def _symbol_heads(mx: Any, sym: Any, spec: PrepareSpec) -> tuple[Any, list[str]]:
    """The symbol to bind (converted by AMP for a mixed-precision dtype, a softmax loss head
    added to train a headless one) and its label arguments."""
    args = sym.list_arguments()
    if spec.data_name not in args:
        raise SpecError(f"the symbol has no input named {spec.data_name!r} (arguments: {args[:5]})")
    labels = [a for a in args if a.endswith("_label")]
    training = spec.mode != "inference"
    amp_target = AMP_TARGETS.get(spec.dtype)
    if amp_target is not None:
        if training:
            raise SpecError(
                f"dtype={spec.dtype!r} runs inference only (AMP training needs "
                "amp.init() before the network is built)"
            )
        from mxnet.contrib import amp

        sym = amp.convert_symbol(sym, target_dtype=amp_target)
    if training and not labels:
        sym = mx.sym.SoftmaxOutput(sym, name="softmax")  # a loss head to train against
        labels = ["softmax_label"]
    return sym, labels


def prepare_symbol(mx: Any, sym: Any, spec: PrepareSpec) -> Prepared:
    """Bind like benchmark_score: a Module, Xavier(magnitude=2) params, data on the device."""
    ctx, batch, data_name = spec.ctx, spec.batch_size, spec.data_name
    shapes = tasks.input_shapes(spec)
    if len(shapes) > 1 or spec.task != "classification" or spec.labels is not None:
        raise SpecError(
            "a Symbol is bound with one data input and its own label heads: input_shape with "
            "several shapes, task= and labels= apply to Gluon blocks (load it with "
            "mx.gluon.SymbolBlock to use them)"
        )
    shape = shapes[0]
    macs = macs_or_none(mx, sym, shape, data_name)
    sym, labels = _symbol_heads(mx, sym, spec)
    training = spec.mode != "inference"
    in_dtype = "float32" if AMP_TARGETS.get(spec.dtype) else spec.dtype
    data_desc = mx.io.DataDesc(data_name, (batch, *shape), dtype=in_dtype)
    _, out_shapes, _ = sym.infer_shape(**{data_name: (batch, *shape)})
    classes = int(out_shapes[0][-1]) if out_shapes and out_shapes[0] else 1
    mod = mx.mod.Module(symbol=sym, context=ctx, data_names=[data_name], label_names=labels or None)
    label_shapes = [(name, (batch,)) for name in labels] if labels else None
    with warnings_quiet():
        mod.bind(
            data_shapes=[data_desc],
            label_shapes=label_shapes,
            for_training=training,
            inputs_need_grad=False,
        )
        mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
    if spec.mode == "training":
        mod.init_optimizer(
            kvstore=None, optimizer=spec.optimizer, optimizer_params=optimizer_params(spec)
        )
    data = [_data(mx, (batch, *shape), ctx, in_dtype)]
    label = [_labels(mx, batch, classes, ctx, "float32") for _ in labels]
    db = mx.io.DataBatch(data, label)
    info = {"form": "symbol-module", "input": [batch, *shape]}

    if spec.mode == "inference":

        def step() -> None:
            mod.forward(db, is_train=False)
    elif spec.mode == "training":

        def step() -> None:
            mod.forward(db, is_train=True)
            mod.backward()
            mod.update()
    else:

        def step() -> None:
            mod.forward_backward(db)

    def check() -> str | None:
        return finite_message("model output", mod.get_outputs())

    return Prepared(step, batch, check, info=info, macs_per_image=macs)
