"""One tiny Gluon network: a convolution, pooling and a dense layer on 3x32x32 images."""

from __future__ import annotations

from typing import Any


def tiny_net() -> Any:
    from mxnet.gluon import nn

    net = nn.HybridSequential()
    net.add(
        nn.Conv2D(16, kernel_size=3, activation="relu"),
        nn.GlobalAvgPool2D(),
        nn.Dense(10),
    )
    return net


def test_tiny_inference(mxperf: Any, mx_ctx: Any) -> None:
    mxperf.inference(tiny_net(), batch_size=8, ctx=mx_ctx, input_shape=(3, 32, 32))
