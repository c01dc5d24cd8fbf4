"""Labels and losses by task (issue #16) on tiny real MXNet networks: segmentation, detection-style
networks with several outputs, user labels, several inputs, and the mismatch message."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from mxnet.gluon import nn  # noqa: E402

from pytest_mxperf.backend.mxnet_backend import MXNetBackend  # noqa: E402
from pytest_mxperf.backend.tasks import LossShapeError, synthetic_boxes  # noqa: E402
from pytest_mxperf.measuring.measure import MeasureConfig  # noqa: E402
from pytest_mxperf.measuring.protocol import PrepareSpec, SpecError  # noqa: E402
from pytest_mxperf.measuring.records import Status  # noqa: E402
from pytest_mxperf.measuring.runner import run_case  # noqa: E402

QUICK = MeasureConfig(
    min_time=0.05, max_time=0.2, warmup_time=0.2, warmup_min_time=0.0, block_time=0.02, min_blocks=3
)
SIZE = 32


@pytest.fixture(scope="module")
def backend() -> MXNetBackend:
    return MXNetBackend()


def fcn(classes: int = 21) -> Any:
    """The issue's FCN-style net: Conv2D ... Conv2DTranspose, output (B, classes, H, W)."""
    net = nn.HybridSequential()
    net.add(
        nn.Conv2D(8, 3, strides=2, padding=1, activation="relu"),
        nn.Conv2D(classes, 1),
        nn.Conv2DTranspose(classes, 4, strides=2, padding=1),
    )
    return net


class TwoHeads(mx.gluon.HybridBlock):  # type: ignore[misc,name-defined]
    """Detection-style: per-anchor class scores (B, A, C) and boxes (B, A, 4)."""

    def __init__(self) -> None:
        super().__init__()
        with self.name_scope():
            self.body = nn.Conv2D(8, 3, strides=4, padding=1, activation="relu")
            self.cls = nn.Conv2D(3, 1)
            self.box = nn.Conv2D(4, 1)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        y = self.body(x)
        cls = F.reshape(F.transpose(self.cls(y), (0, 2, 3, 1)), (0, -1, 3))
        box = F.reshape(F.transpose(self.box(y), (0, 2, 3, 1)), (0, -1, 4))
        return cls, box


class TwoInputs(mx.gluon.HybridBlock):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        with self.name_scope():
            self.a = nn.Dense(5)
            self.b = nn.Dense(5)

    def hybrid_forward(self, F: Any, x: Any, y: Any) -> Any:
        return self.a(x) + self.b(y)


def spec(mode: str = "training", **kw: Any) -> PrepareSpec:
    kw.setdefault("input_shape", (3, SIZE, SIZE))
    return PrepareSpec(mode=mode, batch_size=4, ctx=mx.cpu(), **kw)


def train(backend: MXNetBackend, net: Any, **kw: Any) -> Any:
    done = run_case(backend, net, spec(**kw), QUICK)
    assert done.status == Status.OK, done.error
    assert done.measurement is not None and done.measurement.items_per_sec > 0
    return done.measurement


def test_segmentation_task_makes_pixel_labels(backend: MXNetBackend) -> None:
    m = train(backend, fcn(), task="segmentation")
    assert m.extra["labels"] == [[4, SIZE, SIZE]]
    assert m.extra["task"].startswith("segmentation")


def test_segmentation_with_explicit_labels(backend: MXNetBackend) -> None:
    made: list[tuple[int, Any, str]] = []

    def labels(batch: int, ctx: Any, dtype: str) -> Any:
        made.append((batch, ctx, dtype))
        return mx.nd.zeros((batch, SIZE, SIZE), ctx=ctx, dtype=dtype)

    loss = mx.gluon.loss.SoftmaxCrossEntropyLoss(axis=1)
    m = train(backend, fcn(), labels=labels, loss=loss)
    assert made == [(4, mx.cpu(), "float32")]
    assert m.extra["labels"] == [[4, SIZE, SIZE]]
    # Dense labels and the loss (sparse_label=False) work once labels= is given.
    dense = mx.nd.one_hot(mx.nd.zeros((4, SIZE, SIZE)), 21).transpose((0, 3, 1, 2))
    loss = mx.gluon.loss.SoftmaxCrossEntropyLoss(axis=1, sparse_label=False)
    train(backend, fcn(), labels=dense, loss=loss)


def test_two_output_detection_net_with_labels_and_custom_loss(backend: MXNetBackend) -> None:
    seen: list[tuple[tuple[int, ...], ...]] = []
    ce = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    l1 = mx.gluon.loss.L1Loss()

    def loss(cls: Any, box: Any, cls_t: Any, box_t: Any) -> Any:
        seen.append(tuple(a.shape for a in (cls, box, cls_t, box_t)))
        return ce(cls, cls_t) + l1(box, box_t)

    anchors = (SIZE // 4) ** 2
    labels = (mx.nd.zeros((4, anchors)), mx.nd.zeros((4, anchors, 4)))
    m = train(backend, TwoHeads(), labels=labels, loss=loss, task="detection")
    assert seen[0] == ((4, anchors, 3), (4, anchors, 4), (4, anchors), (4, anchors, 4))
    assert m.extra["labels"] == [[4, anchors], [4, anchors, 4]]


def test_default_loss_mismatch_names_shapes_and_fix(backend: MXNetBackend) -> None:
    with pytest.raises(LossShapeError) as excinfo:
        run_case(backend, fcn(), spec(), QUICK)
    text = str(excinfo.value)
    assert f"outputs (4, 21, {SIZE}, {SIZE}); labels (4,)" in text
    assert 'task="segmentation"' in text and "labels=" in text
    assert "Shape inconsistent" in text  # MXNet's own words are kept at the end


def test_user_loss_mismatch_names_shapes(backend: MXNetBackend) -> None:
    loss = mx.gluon.loss.SoftmaxCrossEntropyLoss(axis=1, sparse_label=False)
    with pytest.raises(SpecError, match=r"outputs \(4, 21, 32, 32\); labels \(4,\)"):
        backend.prepare(fcn(), spec(loss=loss))
    with pytest.raises(SpecError, match=r"loss\(\*outputs, \*labels\)"):
        backend.prepare(TwoHeads(), spec(loss=lambda out, label: out))


def test_detection_task_needs_ssd_outputs(backend: MXNetBackend) -> None:
    with pytest.raises(SpecError, match=r"\(cls_preds, box_preds, anchors\).*\(4, 64, 3\)"):
        backend.prepare(TwoHeads(), spec(task="detection"))


def test_segmentation_task_needs_4d_output(backend: MXNetBackend) -> None:
    with pytest.raises(SpecError, match=r"\(batch, classes, H, W\).*\(4, 5\)"):
        backend.prepare(nn.Dense(5), spec(task="segmentation"))


def test_labels_must_be_ndarrays(backend: MXNetBackend) -> None:
    with pytest.raises(SpecError, match="labels\\[1\\] is a list, not an NDArray"):
        backend.prepare(nn.Dense(5), spec(labels=(mx.nd.zeros(4), [0, 1, 2, 3])))


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_several_inputs(backend: MXNetBackend, mode: str) -> None:
    done = run_case(backend, TwoInputs(), spec(mode, input_shape=((3,), (7,))), QUICK)
    assert done.status == Status.OK, done.error
    assert done.measurement is not None
    assert done.measurement.extra["input"] == [[4, 3], [4, 7]]


def test_symbol_rejects_task_and_labels(backend: MXNetBackend) -> None:
    sym = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3)
    with pytest.raises(SpecError, match="apply to Gluon blocks"):
        backend.prepare(sym, spec(task="segmentation", input_shape=(4,)))


def test_spec_options() -> None:
    made = PrepareSpec.from_options(
        mode="training",
        batch_size=2,
        ctx=None,
        dtype="float32",
        options={"input_shape": [[3, 8, 8], [2]], "task": "detection"},
    )
    assert made.input_shape == ((3, 8, 8), (2,))
    with pytest.raises(ValueError, match="unknown task 'detect'; choose from classification"):
        PrepareSpec(mode="training", batch_size=1, ctx=None, task="detect")


def test_synthetic_boxes_lie_inside_the_image() -> None:
    boxes = synthetic_boxes(5, 300, 200, classes=20)
    assert boxes.shape == (5, 3, 5)
    x1, y1, x2, y2, ids = np.moveaxis(boxes, -1, 0)
    assert (x1 >= 0).all() and (x2 <= 300).all() and (x1 < x2).all()
    assert (y1 >= 0).all() and (y2 <= 200).all() and (y1 < y2).all()
    assert ((ids >= 0) & (ids < 20)).all()
    assert (boxes == synthetic_boxes(5, 300, 200, classes=20)).all()  # the same every run
