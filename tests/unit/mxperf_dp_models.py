"""Models and step hooks for the data-parallel tests.

Worker processes import this module too (the launcher hands them the test process's
sys.path), so everything here is a module-level function driven by environment variables.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, Callable

#: Floats per worker of an extra ``kv.pushpull`` run after every training step.
INJECT_ENV = "MXPERF_TEST_INJECT_FLOATS"
#: "RANK:STEP": that worker kills itself with SIGKILL at that step.
DIE_ENV = "MXPERF_TEST_DIE_AT"
#: "RANK:STEP": that worker hangs (sleeps) from that step on.
HANG_ENV = "MXPERF_TEST_HANG_AT"
INJECT_KEY = 9999


def dense_net() -> Any:
    """A 2-layer MLP: a step of a few milliseconds, so the tests take seconds."""
    from mxnet import gluon

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(10))
    return net


def mobilenet() -> Any:
    from mxnet.gluon.model_zoo import vision

    return vision.mobilenet0_25(classes=10)


def biased_convnet() -> Any:
    """VGG-style: two blocks of two 3x3 Conv2D with bias and a max pool, then Dense(10).

    Before the ranks kept the weights in MXNet's default layout (`train.default_layouts`),
    every dist_sync launch of it aborted (ps-lite kv_app.h:624).
    """
    from mxnet import gluon

    net = gluon.nn.HybridSequential()
    for channels in (8, 16):
        for _ in range(2):
            net.add(gluon.nn.Conv2D(channels, 3, padding=1, activation="relu"))
        net.add(gluon.nn.MaxPool2D(2))
    net.add(gluon.nn.Dense(10))
    return net


def ssd_300_vgg16() -> Any:
    """GluonCV's SSD-300 VGG16 (``[gluoncv]`` extra; random init, nothing downloaded) with its
    class and box predictions reduced to one (batch, 21) output, so that the ranks'
    classification loss reaches every parameter. Needs 300x300 input (smaller inputs leave its
    last extra layers no room)."""
    from gluoncv import model_zoo
    from mxnet import gluon

    class Head(gluon.HybridBlock):  # type: ignore[misc]
        def __init__(self, net: Any) -> None:
            super().__init__()
            with self.name_scope():
                self.net = net

        def hybrid_forward(self, F: Any, x: Any) -> Any:
            cls_preds, box_preds, anchors = self.net(x)
            boxes = F.mean(box_preds, axis=(1, 2)).expand_dims(1)
            out = F.broadcast_add(F.mean(cls_preds, axis=1), boxes)
            # The anchors carry no parameter: in the graph so their constants' shapes are known.
            return F.broadcast_add(out, 0 * F.mean(anchors).reshape((1, 1)))

    ssd = model_zoo.get_model("ssd_300_vgg16_atrous_voc", pretrained=False, pretrained_base=False)
    return Head(ssd)


def resnet18() -> Any:
    """resnet18_v1 (its dist workers aborted every time before `train.default_layouts`)."""
    from mxnet.gluon.model_zoo import vision

    return vision.resnet18_v1(classes=10)


def _die() -> None:
    sys.stderr.write("mxperf test: this worker kills itself\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _hang() -> None:
    time.sleep(3600)


def _at_step(kv: Any, where: str, action: Callable[[], None]) -> Callable[[], None]:
    rank, at = (int(x) for x in where.split(":"))
    count = [0]

    def maybe() -> None:
        count[0] += 1
        if count[0] == at and kv.rank == rank:
            action()

    return maybe


def hooks(kv: Any, contexts: list[Any]) -> Callable[[], None] | None:
    """The per-step extras the test asked for through the environment."""
    steps: list[Callable[[], None]] = []
    floats = int(os.environ.get(INJECT_ENV, "0"))
    if floats and kv is not None:
        import mxnet as mx

        # One server receives every worker's array, so traffic grows with the workers: the
        # injected array does too, to make the growth certain rather than load dependent.
        size = floats * int(kv.num_workers)
        src = mx.nd.ones((size,), ctx=contexts[0])
        dst = mx.nd.zeros((size,), ctx=contexts[0])
        kv.init(INJECT_KEY, src)
        steps.append(lambda: kv.pushpull(INJECT_KEY, src, out=dst))
    for env, action in ((DIE_ENV, _die), (HANG_ENV, _hang)):
        if os.environ.get(env) and kv is not None:
            steps.append(_at_step(kv, os.environ[env], action))
    if not steps:
        return None

    def run() -> None:
        for step in steps:
            step()

    return run
