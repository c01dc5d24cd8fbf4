"""Inception-BN as an MXNet Symbol, for 224x224 ImageNet-style inputs.

The network is the Inception variant with batch normalization from Sergey Ioffe and Christian
Szegedy, "Batch Normalization: Accelerating Deep Network Training by Reducing Internal Covariate
Shift" (ICML 2015, arXiv:1502.03167). It mirrors the "inception-bn" network that MXNet's
``example/image-classification/benchmark_score.py`` scores (the published MXNet throughput
tables), so its layer configuration (filter counts, pooling types) follows that definition:

* stem: 7x7/2 conv, 3x3/2 max pool, 1x1 conv, 3x3 conv, 3x3/2 max pool;
* stage 3: inception blocks 3a, 3b (type A) and 3c (type B, stride 2);
* stage 4: 4a-4d (type A) and 4e (type B, stride 2);
* stage 5: 5a (type A, average pool branch) and 5b (type A, max pool branch);
* global average pool, fully connected layer, softmax output named ``softmax``.

Every convolution is followed by batch normalization and ReLU. Type A blocks concatenate four
branches: 1x1; 1x1 then 3x3; 1x1 then two 3x3 (the paper's replacement of 5x5); 3x3 pool then
1x1 projection. Type B blocks halve the spatial size: 1x1 then 3x3/2; 1x1 then 3x3 then 3x3/2;
and a 3x3/2 max pool passed through unchanged.

As in MXNet's definition, the stem's pools have no padding, so stage 3 runs at 27x27 where the
paper lists 28x28 (stages 4 and 5 are 14x14 and 7x7 in both).

Two deliberate differences from MXNet's definition. The final pool is a global pool instead of
a fixed 7x7 window: at 224x224 both are the same (the last feature map is 7x7), and the global
pool lets small inputs work (13x13 is the smallest), which keeps tests cheap. And ``dtype`` is
honoured: MXNet's definition ignored it, so its float16 Inception-BN scores ran in float32.

Weights are never downloaded: this module only builds the graph, and callers initialize it with
random values.
"""

from __future__ import annotations

from typing import NamedTuple

import mxnet as mx

# Just above cuDNN's minimum epsilon (1e-5), so the cuDNN batch-norm kernel stays eligible on GPU
# even after float32 rounding; MXNet's own benchmark symbols use the same value.
_BN_EPS = 1e-5 + 1e-10
_BN_MOMENTUM = 0.9

SUPPORTED_DTYPES = ("float32", "float16")


class _BlockA(NamedTuple):
    """Channel counts of a type A block (the four concatenated branches)."""

    name: str
    one: int  # 1x1 branch
    three_reduce: int  # 1x1 before the single 3x3
    three: int
    double_reduce: int  # 1x1 before the two stacked 3x3
    double: int
    pool: str  # "avg" or "max"
    proj: int  # 1x1 projection after the pool


class _BlockB(NamedTuple):
    """Channel counts of a type B (stride 2 reduction) block."""

    name: str
    three_reduce: int
    three: int
    double_reduce: int
    double: int


# Output channels: 3a 256, 3b 320, 3c 576, 4a/4b 576, 4c/4d 608, 4e 1056, 5a/5b 1024.
_STAGES: tuple[_BlockA | _BlockB, ...] = (
    _BlockA("3a", 64, 64, 64, 64, 96, "avg", 32),
    _BlockA("3b", 64, 64, 96, 64, 96, "avg", 64),
    _BlockB("3c", 128, 160, 64, 96),
    _BlockA("4a", 224, 64, 96, 96, 128, "avg", 128),
    _BlockA("4b", 192, 96, 128, 96, 128, "avg", 128),
    _BlockA("4c", 160, 128, 160, 128, 160, "avg", 128),
    _BlockA("4d", 96, 128, 192, 160, 192, "avg", 128),
    _BlockB("4e", 128, 192, 192, 256),
    _BlockA("5a", 352, 192, 320, 160, 224, "avg", 128),
    _BlockA("5b", 352, 192, 320, 192, 224, "max", 128),
)


def _conv_bn_relu(
    data: mx.sym.Symbol,
    name: str,
    channels: int,
    kernel: int,
    stride: int = 1,
    pad: int = 0,
) -> mx.sym.Symbol:
    """Square convolution, then batch normalization with a learned scale, then ReLU."""
    conv = mx.sym.Convolution(
        data=data,
        num_filter=channels,
        kernel=(kernel, kernel),
        stride=(stride, stride),
        pad=(pad, pad),
        name=f"{name}_conv",
    )
    bn = mx.sym.BatchNorm(
        data=conv, fix_gamma=False, eps=_BN_EPS, momentum=_BN_MOMENTUM, name=f"{name}_bn"
    )
    return mx.sym.Activation(data=bn, act_type="relu", name=f"{name}_relu")


def _pool3x3(
    data: mx.sym.Symbol, name: str, pool_type: str, stride: int, pad: int
) -> mx.sym.Symbol:
    return mx.sym.Pooling(
        data=data,
        kernel=(3, 3),
        stride=(stride, stride),
        pad=(pad, pad),
        pool_type=pool_type,
        name=name,
    )


def _block_a(data: mx.sym.Symbol, cfg: _BlockA) -> mx.sym.Symbol:
    """Inception block that keeps the spatial size."""
    prefix = f"in{cfg.name}"
    one = _conv_bn_relu(data, f"{prefix}_1x1", cfg.one, 1)

    three = _conv_bn_relu(data, f"{prefix}_3x3_reduce", cfg.three_reduce, 1)
    three = _conv_bn_relu(three, f"{prefix}_3x3", cfg.three, 3, pad=1)

    double = _conv_bn_relu(data, f"{prefix}_d3x3_reduce", cfg.double_reduce, 1)
    double = _conv_bn_relu(double, f"{prefix}_d3x3_a", cfg.double, 3, pad=1)
    double = _conv_bn_relu(double, f"{prefix}_d3x3_b", cfg.double, 3, pad=1)

    pooled = _pool3x3(data, f"{prefix}_{cfg.pool}_pool", cfg.pool, stride=1, pad=1)
    proj = _conv_bn_relu(pooled, f"{prefix}_proj", cfg.proj, 1)

    return mx.sym.Concat(one, three, double, proj, dim=1, name=f"{prefix}_concat")


def _block_b(data: mx.sym.Symbol, cfg: _BlockB) -> mx.sym.Symbol:
    """Inception block that halves the spatial size; the pooled input passes through as is."""
    prefix = f"in{cfg.name}"
    three = _conv_bn_relu(data, f"{prefix}_3x3_reduce", cfg.three_reduce, 1)
    three = _conv_bn_relu(three, f"{prefix}_3x3", cfg.three, 3, stride=2, pad=1)

    double = _conv_bn_relu(data, f"{prefix}_d3x3_reduce", cfg.double_reduce, 1)
    double = _conv_bn_relu(double, f"{prefix}_d3x3_a", cfg.double, 3, pad=1)
    double = _conv_bn_relu(double, f"{prefix}_d3x3_b", cfg.double, 3, stride=2, pad=1)

    pooled = _pool3x3(data, f"{prefix}_max_pool", "max", stride=2, pad=1)

    return mx.sym.Concat(three, double, pooled, dim=1, name=f"{prefix}_concat")


def get_symbol(num_classes: int = 1000, dtype: str = "float32") -> mx.sym.Symbol:
    """Build Inception-BN ending in a ``SoftmaxOutput`` named ``softmax``.

    The input variable is ``data`` (shape ``(N, 3, H, W)``, 224x224 in the published benchmarks)
    and the label variable is ``softmax_label``. With ``dtype="float16"`` the input is cast to
    float16 on entry and the class scores are cast back to float32 before the softmax, as
    MXNet's benchmark symbols do; convolution and FC weights are then float16 (MXNet keeps the
    batch-norm parameters in float32).
    """
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype must be one of {SUPPORTED_DTYPES}, got {dtype!r}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be positive, got {num_classes}")

    net = mx.sym.Variable("data")
    if dtype == "float16":
        net = mx.sym.Cast(data=net, dtype="float16", name="data_fp16")

    net = _conv_bn_relu(net, "stem1", 64, 7, stride=2, pad=3)
    net = _pool3x3(net, "stem1_max_pool", "max", stride=2, pad=0)
    net = _conv_bn_relu(net, "stem2_reduce", 64, 1)
    net = _conv_bn_relu(net, "stem2", 192, 3, pad=1)
    net = _pool3x3(net, "stem2_max_pool", "max", stride=2, pad=0)

    for cfg in _STAGES:
        net = _block_a(net, cfg) if isinstance(cfg, _BlockA) else _block_b(net, cfg)

    net = mx.sym.Pooling(
        data=net, kernel=(7, 7), global_pool=True, pool_type="avg", name="global_avg_pool"
    )
    net = mx.sym.Flatten(data=net, name="flatten")
    net = mx.sym.FullyConnected(data=net, num_hidden=num_classes, name="fc")
    if dtype == "float16":
        net = mx.sym.Cast(data=net, dtype="float32", name="fc_fp32")
    return mx.sym.SoftmaxOutput(data=net, name="softmax")
