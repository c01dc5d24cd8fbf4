"""Build and time the training step of one data-parallel process (in process or as a rank).

The model and the optional step hook come from importable ``"module:function"`` references, the
devices from ``"gpu(1)"``-style names; the step is forward, backward and one Gluon ``Trainer``
step over all devices, and timing keeps the wall-clock span of every block so the workers of
a run can be summed over their common window. MXNet arrives as an ``mx`` argument.
"""

from __future__ import annotations

import importlib
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pytest_mxperf.measuring.dp_scaling import (
    DataParallelError,
    DataParallelSpec,
    is_symbol_file,
    parse_context,
)
from pytest_mxperf.measuring.measure import MeasureConfig, Measurement, measure

StepHook = Callable[[], object]


# timing with a timeline -------------------------------------------------------------------------


class _RecordingClock:
    """A monotonic clock on the wall-clock scale that keeps every reading.

    Anchoring perf_counter to time.time once keeps it monotonic within the process while
    making readings of processes on one host comparable (the common window needs that).
    """

    def __init__(self) -> None:
        self.offset = time.time() - time.perf_counter()
        self.readings: list[float] = []

    def __call__(self) -> float:
        now = time.perf_counter() + self.offset
        self.readings.append(now)
        return now


def block_spans(
    readings: Sequence[float], durations: Sequence[float]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Find each timed block's (start, end) among a clock's readings.

    The engine reports each block as ``end - start`` of two readings of the clock it was
    given; the blocks are the last intervals, so matching exact differences from the end
    recovers them without depending on how often the engine reads the clock otherwise.
    """
    starts: list[float] = []
    ends: list[float] = []
    j = len(readings) - 1
    for seconds in reversed(durations):
        while j >= 1 and readings[j] - readings[j - 1] != seconds:
            j -= 1
        if j < 1:
            raise DataParallelError("could not find the timed blocks among the clock readings")
        starts.append(readings[j - 1])
        ends.append(readings[j])
        j -= 2
    return tuple(reversed(starts)), tuple(reversed(ends))


def measure_with_timeline(
    step: Callable[[], object],
    *,
    items_per_step: int,
    sync: Callable[[], object],
    config: MeasureConfig,
) -> tuple[Measurement, tuple[float, ...], tuple[float, ...]]:
    """`measure` plus the wall-clock span of every timed block."""
    clock = _RecordingClock()
    result = measure(step, items_per_step=items_per_step, sync=sync, clock=clock, config=config)
    starts, ends = block_spans(clock.readings, result.block_seconds)
    return result, starts, ends


def context_name(ctx: Any) -> str:
    """An ``mx.Context`` (or a string naming one) as ``"gpu(1)"``."""
    if isinstance(ctx, str):
        kind, index = parse_context(ctx)
    else:
        kind, index = str(ctx.device_type).replace("cpu_pinned", "cpu"), int(ctx.device_id)
    return f"{kind}({index})"


def to_context(mx: Any, text: str) -> Any:
    kind, index = parse_context(text)
    return mx.gpu(index) if kind == "gpu" else mx.cpu(index)


def load_object(ref: str) -> Any:
    """Import ``"package.module:attribute"`` (attributes may be dotted)."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected 'package.module:function', got {ref!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise DataParallelError(f"cannot import {module_name!r} for {ref!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise DataParallelError(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


def object_ref(obj: Any) -> str:
    """The ``"module:qualname"`` another process can import ``obj`` by, or a clear error."""
    if isinstance(obj, str):
        return obj
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        raise DataParallelError(
            f"{obj!r} cannot be imported by a worker process: pass a module-level function "
            "as 'package.module:function'"
        )
    return f"{module}:{qualname}"


@dataclass(frozen=True)
class TrainingStep:
    """A training step over several devices, ready for the engine."""

    step: Callable[[], object]
    items_per_step: int
    kv: Any
    update_on_kvstore: bool | None


def build_training_step(
    mx: Any,
    net: Any,
    contexts: Sequence[Any],
    spec: DataParallelSpec,
    *,
    kv: Any,
    update_on_kvstore: bool | None = None,
    hook: StepHook | None = None,
) -> TrainingStep:
    """Forward, backward and ``Trainer.step`` on every device, the Gluon multi-device way.

    A global batch of N x batch_per_device synthetic images is split over the devices once by
    ``gluon.utils.split_and_load`` (device resident, outside the timing). ``kv`` is the kvstore
    object the one ``Trainer`` uses, or None for no exchange (the compute-only step).
    """
    gluon = mx.gluon
    n = len(contexts)
    batch = spec.batch_per_device * n
    params = net.collect_params()
    for p in params.values():
        try:
            p.list_ctx()
        except RuntimeError:  # not initialized yet: deferred to the first forward
            p.initialize(ctx=list(contexts), default_init=mx.init.Xavier(magnitude=2))
    params.reset_ctx(list(contexts))
    if isinstance(net, gluon.HybridBlock):
        net.hybridize(static_alloc=True, static_shape=True)
    data = mx.nd.random.uniform(-1, 1, shape=(batch, *spec.input_shape))
    xs = gluon.utils.split_and_load(data, list(contexts))
    if spec.num_classes:
        classes = spec.num_classes
    else:
        # In training mode: an inference-mode forward leaves convolution weights in oneDNN's
        # layout, which a dist kvstore cannot send (`default_layouts`).
        with mx.autograd.train_mode():
            classes = int(net(xs[0]).shape[-1])
    default_layouts(mx, params)
    labels = mx.nd.random.randint(0, classes, shape=(batch,)).astype("float32")
    ys = gluon.utils.split_and_load(labels, list(contexts))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    opt_params: dict[str, Any] = {"learning_rate": spec.learning_rate}
    if spec.optimizer.lower() in ("sgd", "nag"):
        opt_params["momentum"] = 0.9  # as train_imagenet and the inference back end
    trainer = gluon.Trainer(
        params, spec.optimizer, opt_params, kvstore=kv, update_on_kvstore=update_on_kvstore
    )
    autograd = mx.autograd

    def step() -> None:
        with autograd.record():
            losses = [loss_fn(net(x), y) for x, y in zip(xs, ys)]
        for value in losses:
            value.backward()
        trainer.step(batch)
        if hook is not None:
            hook()

    return TrainingStep(step, batch, kv, update_on_kvstore)


def default_layouts(mx: Any, params: Any) -> None:
    """Put every initialized parameter array of ``params`` back in MXNet's default layout.

    MXNet's CPU build (oneDNN, ``MXNET_MKLDNN_ENABLED``) reorders the weight array of a
    Convolution or Deconvolution in place into a blocked oneDNN layout whenever the operator
    runs in inference mode (outside ``autograd.record``/``train_mode``), e.g. a factory that
    runs one batch to finish deferred initialization. A dist kvstore cannot send such an
    array: the ``Trainer``'s first ``step`` initializes every key on the servers with a push
    from rank 0, whose engine operation then fails with "We can't generate TBlob for MKLDNN
    data". The engine drops that error (the push writes no array that could carry it), so the
    key never reaches the server, and the next request for it aborts a process: the server's
    ``Check failed: !stored.is_none(): init K first`` on a pull, or, when the first request is
    a worker's push-pull that the server takes for the initialization and answers without
    data, the worker's ``kv_app.h:624 Check failed: msg.data.size() >= 2``. Whether a weight
    is still in that layout when the push runs depends on whether the engine has yet run the
    first training forward (which reorders it back), so some models failed every time and
    others now and then.

    ``MXNDArrayGetData`` (C API) reorders an array to the default layout and waits for it;
    for an array already in it, it only returns its address. Parameters not initialized yet
    (deferred to the first forward, which trains) are skipped.
    """
    import ctypes

    mx.nd.waitall()  # a pending reorder must have run before the layout is looked at
    address = ctypes.c_void_p()
    for param in params.values():
        try:
            arrays = param.list_data()
        except mx.gluon.parameter.DeferredInitializationError:
            continue  # initialized by the first forward, which trains
        for array in arrays:
            mx.base.check_call(mx.base._LIB.MXNDArrayGetData(array.handle, ctypes.byref(address)))


def make_hook(spec: DataParallelSpec, kv: Any, contexts: Sequence[Any]) -> StepHook | None:
    if spec.step_hook is None:
        return None
    hook: StepHook | None = load_object(spec.step_hook)(kv, list(contexts))
    return hook


def load_symbol_block(path: str) -> Any:
    """A Gluon ``SymbolBlock`` from ``PREFIX-symbol.json`` (input ``data``), with the weights
    of the newest ``PREFIX-NNNN.params`` beside it when there is one (else initialized fresh:
    throughput does not depend on the weights)."""
    from pytest_mxperf.system.mxnet_import import import_mxnet

    symbol = Path(path)
    if not symbol.is_file():
        raise DataParallelError(f"the symbol file {path!r} does not exist")
    prefix = (
        path[: -len("-symbol.json")] if path.endswith("-symbol.json") else path[: -len(".json")]
    )
    params = sorted(Path(prefix).parent.glob(Path(prefix).name + "-*.params"))
    mx = import_mxnet()
    with warnings.catch_warnings():
        # MXNet warns that the input's dtype is unknown until the first batch: it is float32.
        warnings.filterwarnings("ignore", "Cannot decide type", UserWarning)
        return mx.gluon.SymbolBlock.imports(path, ["data"], str(params[-1]) if params else None)


def build_model(spec: DataParallelSpec) -> Any:
    if is_symbol_file(spec.factory):
        return load_symbol_block(spec.factory)
    net = load_object(spec.factory)()
    if net is None:
        raise DataParallelError(f"the factory {spec.factory!r} returned None, not a Gluon block")
    return net


def omp_threads() -> int | None:
    """The OMP_NUM_THREADS in force in this process, if set."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() else None
