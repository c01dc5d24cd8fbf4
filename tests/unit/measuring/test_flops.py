"""FLOPs per image from the graph (against published multiply-accumulate counts) and the
arithmetic of the peak probe. No timing is asserted."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_mxperf.measuring.flops import (
    FlopCount,
    LayerMACs,
    count_macs,
    macs_from_graph,
    matmul_gflops,
    passes,
    peak_gflops,
    percent_of_peak,
)


def test_macs_from_graph_without_mxnet() -> None:
    graph = {
        "nodes": [
            {"op": "null", "name": "data", "inputs": []},
            {"op": "null", "name": "w0", "inputs": []},
            {"op": "Convolution", "name": "conv", "inputs": [[0, 0, 0], [1, 0, 0]]},
            {"op": "null", "name": "w1", "inputs": []},
            {"op": "Deconvolution", "name": "deconv", "inputs": [[2, 0, 0], [3, 0, 0]]},
            {"op": "Activation", "name": "relu", "inputs": [[4, 0, 0]]},
            {"op": "null", "name": "w2", "inputs": []},
            {"op": "FullyConnected", "name": "fc", "inputs": [[5, 0, 0], [6, 0, 0]]},
        ]
    }
    shapes = {
        (0, 0): (2, 4, 8, 8),
        (1, 0): (6, 2, 3, 3),  # 6 filters, 2 groups of 2 input channels
        (2, 0): (2, 6, 8, 8),
        (3, 0): (6, 3, 2, 2),  # deconv: 6 in, 3 out, 2x2 kernel, stride 2
        (4, 0): (2, 3, 16, 16),
        (5, 0): (2, 3, 16, 16),
        (6, 0): (10, 768),
        (7, 0): (2, 10),
    }
    layers = macs_from_graph(graph, shapes)  # batch 2: counts stay per image
    assert layers == [
        LayerMACs("conv", "Convolution", 6 * 8 * 8 * 2 * 3 * 3),
        LayerMACs("deconv", "Deconvolution", 6 * 8 * 8 * 3 * 2 * 2),
        LayerMACs("fc", "FullyConnected", 10 * 768),
    ]
    count = FlopCount((4, 8, 8), tuple(layers))
    assert count.macs == 6912 + 4608 + 7680
    assert count.flops == 2 * count.macs
    by_op = {layer.op: layer.macs for layer in count.layers}  # one layer of each type here
    assert by_op == {"Convolution": 6912, "Deconvolution": 4608, "FullyConnected": 7680}


def test_peak_arithmetic() -> None:
    # 10 products of 1000 x 1000 matrices (2 GFLOP each) in 0.5 s: 40 GFLOP/s.
    assert matmul_gflops(1000, 10, 0.5) == pytest.approx(40.0)
    # 100 img/s of a 4 GMAC (8 GFLOP) model on a 1600 GFLOP/s device: 50% of peak.
    assert percent_of_peak(100.0, 4_000_000_000, 1600.0) == pytest.approx(50.0)
    # Training at the same img/s does three forward passes' worth: 150%.
    assert percent_of_peak(100.0, 4_000_000_000, 1600.0, passes("training")) == pytest.approx(150)
    assert [passes(m) for m in ("inference", "forward_backward", "pipeline")] == [1, 3, 1]
    with pytest.raises(ValueError):
        percent_of_peak(1.0, 1, 0.0)
    with pytest.raises(ValueError):
        matmul_gflops(1, 1, 0.0)


class FakeMX:
    """Just enough of ``mx`` for the probe: products advance a fake clock by 0.1 s each, once
    synced (as MXNet's asynchronous engine does)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pending = 0
        self.dots = 0
        self.syncs = 0
        array: Any = SimpleNamespace()
        array.astype = lambda dtype: array
        self.nd = SimpleNamespace(
            random=SimpleNamespace(uniform=lambda shape, ctx: array),
            dot=self._dot,
            waitall=self._waitall,
        )

    def _dot(self, a: Any, b: Any) -> None:
        self.pending += 1
        self.dots += 1

    def _waitall(self) -> None:
        self.now += 0.1 * self.pending
        self.pending = 0
        self.syncs += 1

    def clock(self) -> float:
        return self.now


def test_peak_probe_counts_every_synced_product() -> None:
    mx = FakeMX()
    ctx = SimpleNamespace(device_type="cpu")
    gflops = peak_gflops(mx, ctx, seconds=1.0, n=100, clock=mx.clock)
    timed = mx.dots - 1  # the first product is the warm-up
    # Blocks of 1, 2, 4, 8 products: 15 products, 1.5 s of fake time, then the probe stops.
    assert timed == 15 and mx.syncs == 5
    assert gflops == pytest.approx(2 * 100**3 * 15 / 1.5 / 1e9)


# --- real MXNet, random weights, nothing downloaded ---------------------------------------


@pytest.fixture(scope="module")
def mx() -> Any:
    from pytest_mxperf.system.mxnet_import import MXNetUnavailable, import_mxnet

    try:
        return import_mxnet()
    except MXNetUnavailable as exc:
        pytest.skip(str(exc))


# Published multiply-accumulates per 224x224 image, in GMACs.
# mobilenet1.0: Howard et al. 2017, Table 8: 569 million mult-adds.
# vgg16: 15.5 G (Simonyan & Zisserman's 16-layer net, as tabulated by model zoos).
# resnet50_v1: He et al. 2015, Table 1: 3.8 G. Gluon's resnet50_v1 is this original layout
# (stride on the first 1x1 convolution of a bottleneck); the often quoted 4.1 G is ResNet-50
# v1.5 (stride on the 3x3), checked below on a v1.5 built from the same zoo class.
PUBLISHED_GMACS = {"mobilenet1.0": 0.569, "vgg16": 15.5, "resnet50_v1": 3.8}


@pytest.mark.parametrize("name", sorted(PUBLISHED_GMACS))
def test_model_zoo_macs_match_published(mx: Any, name: str) -> None:
    from mxnet.gluon.model_zoo import vision

    net = vision.get_model(name, pretrained=False)
    count = count_macs(net, (3, 224, 224), mx=mx)
    assert count.macs / 1e9 == pytest.approx(PUBLISHED_GMACS[name], rel=0.05)
    # A symbol traced from the block counts the same.
    assert count_macs(net(mx.sym.var("data")), (3, 224, 224), mx=mx).macs == count.macs


def test_resnet50_v1_5_matches_the_4_1_gmacs_figure(mx: Any) -> None:
    from mxnet.gluon import HybridBlock, nn
    from mxnet.gluon.model_zoo.vision.resnet import ResNetV1

    class BottleneckV1b(HybridBlock):  # type: ignore[misc]
        """ResNet v1.5 bottleneck: the stride moves to the 3x3 convolution."""

        def __init__(
            self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0,
            **kwargs: Any,
        ) -> None:  # fmt: skip
            super().__init__(**kwargs)
            self.body = nn.HybridSequential(prefix="")
            for width, kernel, step in ((channels // 4, 1, 1), (channels // 4, 3, stride)):
                self.body.add(nn.Conv2D(width, kernel, step, kernel // 2, use_bias=False))
                self.body.add(nn.BatchNorm())
                self.body.add(nn.Activation("relu"))
            self.body.add(nn.Conv2D(channels, 1, use_bias=False))
            self.body.add(nn.BatchNorm())
            self.downsample = None
            if downsample:
                self.downsample = nn.HybridSequential(prefix="")
                self.downsample.add(nn.Conv2D(channels, 1, stride, use_bias=False))
                self.downsample.add(nn.BatchNorm())

        def hybrid_forward(self, F: Any, x: Any) -> Any:
            residual = x if self.downsample is None else self.downsample(x)
            return F.Activation(self.body(x) + residual, act_type="relu")

    net = ResNetV1(BottleneckV1b, [3, 4, 6, 3], [64, 256, 512, 1024, 2048])
    count = count_macs(net, mx=mx)
    assert count.macs / 1e9 == pytest.approx(4.1, rel=0.05)


def test_grouped_deconvolution_and_sequence_dense(mx: Any) -> None:
    from mxnet.gluon import nn

    net = nn.HybridSequential()
    net.add(
        nn.Conv2D(8, 3, padding=1, in_channels=4),  # 8 x 16 x 16 x (4 x 3 x 3)
        nn.Conv2D(8, 3, padding=1, groups=8, in_channels=8),  # depthwise: 8 x 16 x 16 x 9
        nn.Conv2DTranspose(2, 2, strides=2, in_channels=8),  # 8 x 16 x 16 x (2 x 2 x 2)
        nn.Dense(5, flatten=False, in_units=32),  # 2 x 32 rows x 5 x 32
    )
    count = count_macs(net, (4, 16, 16), mx=mx)
    assert [layer.macs for layer in count.layers] == [
        8 * 256 * 36,
        8 * 256 * 9,
        8 * 256 * 8,
        2 * 32 * 5 * 32,
    ]
    assert [layer.op for layer in count.layers] == [
        "Convolution",
        "Convolution",
        "Deconvolution",
        "FullyConnected",
    ]


def test_a_plain_block_is_refused(mx: Any) -> None:
    from mxnet.gluon import nn

    class Plain(nn.Block):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            return x

    with pytest.raises(TypeError, match="cannot count FLOPs of Plain: give a Gluon HybridBlock"):
        count_macs(Plain(), mx=mx)


def test_peak_probe_runs_on_this_cpu(mx: Any) -> None:
    # Behaviour only: a small, short probe returns a positive finite figure.
    value = peak_gflops(mx, mx.cpu(), seconds=0.05, n=128)
    assert 0 < value < float("inf")
