"""GluonCV models train through the plugin (issue #16): SSD with real targets and SSDMultiBoxLoss,
a segmentation network with its auxiliary head. Random weights, nothing downloaded; runs in the
tox env ``gluoncv`` (``pip install 'pytest-mxperf[cpu,gluoncv]'``) and skips without GluonCV."""

from __future__ import annotations

from typing import Any

import pytest

mx = pytest.importorskip("mxnet")
gluoncv = pytest.importorskip(
    "gluoncv", reason="GluonCV is not installed: pip install 'pytest-mxperf[cpu,gluoncv]'"
)

from pytest_mxperf.backend.mxnet_backend import MXNetBackend  # noqa: E402
from pytest_mxperf.measuring.measure import MeasureConfig  # noqa: E402
from pytest_mxperf.measuring.protocol import PrepareSpec  # noqa: E402
from pytest_mxperf.measuring.records import Status  # noqa: E402
from pytest_mxperf.measuring.runner import run_case  # noqa: E402

QUICK = MeasureConfig(
    min_time=0.05, max_time=0.2, warmup_time=0.1, warmup_min_time=0.0, block_time=0.02, min_blocks=2
)
#: The smallest input SSD-300 VGG16 takes (its last 3x3 valid convolution needs a 3x3 map).
SSD_SIZE = 272


@pytest.fixture(scope="module")
def backend() -> MXNetBackend:
    return MXNetBackend()


def model(name: str, **kw: Any) -> Any:
    return gluoncv.model_zoo.get_model(name, pretrained=False, pretrained_base=False, **kw)


def test_ssd_trains_on_real_targets_with_multibox_loss(backend: MXNetBackend) -> None:
    net = model("ssd_300_vgg16_atrous_voc")
    spec = PrepareSpec(
        mode="training",
        batch_size=1,
        ctx=mx.cpu(),
        input_shape=(3, SSD_SIZE, SSD_SIZE),
        task="detection",
    )
    done = run_case(backend, net, spec, QUICK)
    assert done.status == Status.OK, done.error
    assert done.measurement is not None and done.measurement.items_per_sec > 0
    extra = done.measurement.extra
    assert extra["task"] == "detection: SSD targets, SSDMultiBoxLoss"
    (cls_shape, box_shape) = extra["labels"]
    anchors = cls_shape[1]
    assert cls_shape == [1, anchors] and box_shape == [1, anchors, 4] and anchors > 1000


def test_ssd_targets_match_boxes(backend: MXNetBackend) -> None:
    """Some anchors are matched to the synthetic boxes (class ids 1..20), the rest background."""
    from pytest_mxperf.backend import tasks

    net = model("ssd_300_vgg16_atrous_voc")
    net.initialize()
    x = mx.nd.zeros((2, 3, SSD_SIZE, SSD_SIZE))
    with mx.autograd.train_mode():
        outs = list(net(x))
    spec = PrepareSpec(
        mode="training", batch_size=2, ctx=mx.cpu(), input_shape=x.shape[1:], task="detection"
    )
    setup = tasks.training(mx, outs, spec)
    cls_targets = setup.labels[0].asnumpy()
    assert ((cls_targets > 0).sum(axis=1) >= tasks.BOXES_PER_IMAGE).all()
    assert cls_targets.max() <= 20 and cls_targets.min() >= 0


def test_segmentation_network_trains(backend: MXNetBackend) -> None:
    net = model("fcn_resnet50_voc", crop_size=64, base_size=64)
    spec = PrepareSpec(
        mode="training", batch_size=2, ctx=mx.cpu(), input_shape=(3, 64, 64), task="segmentation"
    )
    done = run_case(backend, net, spec, QUICK)
    assert done.status == Status.OK, done.error
    assert done.measurement is not None
    assert done.measurement.extra["labels"] == [[2, 64, 64]]
