"""Multiply-accumulates per image of a model's graph, and a short probe of the device's peak, so
a throughput can be shown as a fraction of what the hardware can do.

Counted layers: Convolution (grouped and depthwise too), Deconvolution and FullyConnected, the
layers that hold nearly all the arithmetic of image models; biases, normalisation, activations
and pooling are left out, as in the published MAC counts. One MAC is two FLOPs.

MXNet is imported only by the functions that need it, through
:func:`pytest_mxperf.system.mxnet_import.import_mxnet`; :func:`macs_from_graph` works on the
graph JSON and a shape table alone.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

COUNTED_OPS = ("Convolution", "Deconvolution", "FullyConnected")
Shape = tuple[int, ...]


@dataclass(frozen=True)
class LayerMACs:
    """One counted layer: its node name, operator and multiply-accumulates per image."""

    name: str
    op: str
    macs: int


@dataclass(frozen=True)
class FlopCount:
    """Multiply-accumulates per image of a graph at one input shape."""

    input_shape: Shape
    layers: tuple[LayerMACs, ...]

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    @property
    def flops(self) -> int:
        """FLOPs per image: two per multiply-accumulate."""
        return 2 * self.macs


def _prod(values: Sequence[int]) -> int:
    return math.prod(int(v) for v in values)


def macs_from_graph(
    graph: Mapping[str, Any], shapes: Mapping[tuple[int, int], Shape]
) -> list[LayerMACs]:
    """Counted layers of an MXNet graph (the JSON of ``Symbol.tojson()``), per image: shapes
    are read past their batch axis, so any batch size gives the same counts.

    :param shapes: the shape of every node output, keyed by ``(node index, output index)``.
    """
    nodes = graph["nodes"]
    layers = []
    for i, node in enumerate(nodes):
        op = node.get("op")
        if op not in COUNTED_OPS:
            continue
        inputs = node["inputs"]
        data = shapes[(inputs[0][0], inputs[0][1])]
        weight = shapes[(inputs[1][0], inputs[1][1])]
        out = shapes[(i, 0)]
        if op == "Convolution":
            # Every output element sums over (input channels / groups) x kernel: the weight's
            # shape past its first axis, whatever the layout.
            macs = _prod(out[1:]) * _prod(weight[1:])
        elif op == "Deconvolution":
            # Every input element is scattered through (output channels / groups) x kernel.
            macs = _prod(data[1:]) * _prod(weight[1:])
        else:  # FullyConnected: each output unit is a dot product over the input units
            macs = _prod(out[1:]) * int(weight[1])
        layers.append(LayerMACs(str(node["name"]), str(op), macs))
    return layers


def _as_symbol(mx: Any, model: Any, input_name: str) -> Any:
    if isinstance(model, mx.sym.Symbol):
        return model
    if isinstance(model, mx.gluon.HybridBlock):
        # Tracing a hybrid block with a symbol gives its graph; no weights are needed.
        out = model(mx.sym.var(input_name))
        return out[0] if isinstance(out, (list, tuple)) else out
    raise TypeError(
        f"cannot count FLOPs of {type(model).__name__}: give a Gluon HybridBlock or an "
        "mx.sym.Symbol (a plain Block has no graph to read)"
    )


def count_macs(
    model: Any,
    input_shape: Sequence[int] = (3, 224, 224),
    *,
    input_name: str = "data",
    mx: Any = None,
) -> FlopCount:
    """Multiply-accumulates per image of ``model`` (a Gluon HybridBlock or an
    ``mx.sym.Symbol``) for one input of ``input_shape`` (without the batch axis)."""
    if mx is None:
        from pytest_mxperf.system.mxnet_import import import_mxnet

        mx = import_mxnet()
    sym = _as_symbol(mx, model, input_name)
    shape = (1, *(int(v) for v in input_shape))
    internals = sym.get_internals()
    args, outs, aux = internals.infer_shape(**{input_name: shape})
    if outs is None:
        raise ValueError(f"cannot infer the shapes of the graph for {input_name}={shape}")
    by_name: dict[str, Shape] = {}
    for names, found in (
        (internals.list_arguments(), args),
        (internals.list_outputs(), outs),
        (internals.list_auxiliary_states(), aux),
    ):
        by_name.update({n: tuple(s) for n, s in zip(names, found)})
    graph = json.loads(sym.tojson())
    shapes: dict[tuple[int, int], Shape] = {}
    for i, node in enumerate(graph["nodes"]):
        name = node["name"]
        if node["op"] == "null":
            if name in by_name:
                shapes[(i, 0)] = by_name[name]
            continue
        for j in range(_outputs(node, by_name)):
            key = f"{name}_output" if f"{name}_output" in by_name else f"{name}_output{j}"
            if key in by_name:
                shapes[(i, j)] = by_name[key]
    return FlopCount(shape[1:], tuple(macs_from_graph(graph, shapes)))


def macs_or_none(
    mx: Any, model: Any, input_shape: Sequence[int], input_name: str = "data"
) -> int | None:
    """`count_macs`' total for a benchmark, or None when the graph cannot be read or counts
    nothing (a plain Block, shapes that cannot be inferred): a case is never lost to it."""
    try:
        macs = count_macs(model, input_shape, input_name=input_name, mx=mx).macs
    except Exception:
        return None
    return macs or None


def _outputs(node: Mapping[str, Any], by_name: Mapping[str, Shape]) -> int:
    name = node["name"]
    if f"{name}_output" in by_name:
        return 1
    count = 0
    while f"{name}_output{count}" in by_name:
        count += 1
    return count


# --- peak of the device -------------------------------------------------------------------


def matmul_gflops(n: int, iterations: int, seconds: float) -> float:
    """GFLOP/s of ``iterations`` products of two ``n`` x ``n`` matrices in ``seconds``
    (2 n^3 FLOPs each)."""
    if seconds <= 0:
        raise ValueError("seconds must be > 0")
    return 2.0 * n**3 * iterations / seconds / 1e9


def peak_gflops(
    mx: Any,
    ctx: Any,
    dtype: str = "float32",
    seconds: float = 1.0,
    n: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """A short probe of the device's dense arithmetic: square matrix products
    (``mx.nd.dot``) for about ``seconds``, each timed block ending with ``waitall``.

    The default size is 1024 on CPU and 4096 on GPU: large enough to reach the BLAS/cuBLAS
    plateau, small enough to finish a product in well under ``seconds``.
    """
    if n is None:
        n = 4096 if getattr(ctx, "device_type", "cpu") == "gpu" else 1024
    a = mx.nd.random.uniform(shape=(n, n), ctx=ctx).astype(dtype)
    b = mx.nd.random.uniform(shape=(n, n), ctx=ctx).astype(dtype)
    mx.nd.dot(a, b)  # warm-up: BLAS threads, cuBLAS handles, memory pool
    mx.nd.waitall()
    iterations, batch = 0, 1
    start = clock()
    elapsed = 0.0
    while elapsed < seconds:
        for _ in range(batch):
            mx.nd.dot(a, b)
        mx.nd.waitall()  # MXNet is asynchronous: the products end here
        iterations += batch
        elapsed = clock() - start
        batch *= 2  # fewer syncs as the probe goes on
    return matmul_gflops(n, iterations, elapsed)


#: Forward passes' worth of arithmetic per image in each mode. A backward pass costs about two
#: forward passes (the gradients of the layer inputs and of the weights are each a product as
#: large as the forward one); the optimizer update is small next to them. Modes not listed
#: (a data pipeline alone) count one pass.
PASSES = {"inference": 1, "training": 3, "forward_backward": 3}


def passes(mode: str) -> int:
    """Forward passes' worth of arithmetic per image in ``mode`` (`PASSES`)."""
    return PASSES.get(mode, 1)


def percent_of_peak(
    images_per_sec: float, macs_per_image: int, peak: float, mode_passes: int = 1
) -> float:
    """Achieved FLOP/s as a percentage of ``peak`` GFLOP/s: img/s x FLOPs per image / peak,
    the forward FLOPs counted ``mode_passes`` times (3 for training, `passes`)."""
    if peak <= 0:
        raise ValueError("peak must be > 0")
    return 100.0 * images_per_sec * 2.0 * macs_per_image * mode_passes / 1e9 / peak
