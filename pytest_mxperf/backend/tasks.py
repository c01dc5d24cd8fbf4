"""Labels and losses by task for the training step of a Gluon block (issue #16).

Classification (labels ``(batch,)``), segmentation (labels ``(batch, H, W)`` from the output's
shape, pixel-wise softmax cross-entropy over the class axis) and SSD detection (class and box
targets made once from synthetic boxes with GluonCV's `SSDTargetGenerator`, loss
`SSDMultiBoxLoss`), or the user's own ``labels=``. The loss is always called as
``loss(*outputs, *labels)``. A loss that does not fit the outputs and labels is a
`LossShapeError` that names their shapes and the fix.

Part of the MXNet back end: every function takes the imported ``mx`` module; GluonCV is imported
only for ``task="detection"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pytest_mxperf.measuring.protocol import TASKS, PrepareSpec, SpecError, looks_like_oom

#: GluonCV's MixSoftmaxCrossEntropyLoss weight of auxiliary segmentation heads (FCN, PSPNet).
AUX_WEIGHT = 0.2
#: Synthetic ground-truth boxes per image for detection targets (the same for every image).
BOXES_PER_IMAGE = 3

#: Optimizer settings of a task, over train_imagenet's: GluonCV train_ssd.py's lr 0.001 and wd
#: 5e-4 for SSD, plus clip_gradient (fused into the SGD update) because from random weights the
#: same synthetic batch otherwise drives the SSD loss to NaN within ~10 steps.
OPTIMIZER_DEFAULTS: dict[str, dict[str, float]] = {
    "detection": {"learning_rate": 0.001, "wd": 0.0005, "clip_gradient": 1.0},
}

_LABELS_HELP = (
    "labels= (an NDArray, a tuple of them, or a callable (batch_size, ctx, dtype) -> labels) "
    "with a loss= called as loss(*outputs, *labels)"
)
_TASK_LOSS = {
    "classification": "softmax cross-entropy on labels (batch,) of class ids",
    "segmentation": "pixel-wise softmax cross-entropy over axis 1 on labels (batch, H, W)",
    "detection": "GluonCV SSDMultiBoxLoss on SSD class and box targets",
}


class LossShapeError(SpecError):
    """The loss cannot take the model's outputs and the labels (shapes or count disagree)."""


@dataclass
class Training:
    """What the training step computes the loss from: labels on the device and the loss,
    called as ``loss(*outputs, *labels)``; ``describe`` says which for the result's info."""

    labels: list[Any]
    loss: Callable[..., Any]
    describe: str


def input_shapes(spec: PrepareSpec) -> list[tuple[int, ...]]:
    """The shapes (without batch) of the network's inputs: ``input_shape`` is one shape, or a
    tuple of shapes for a network that takes several inputs."""
    shape = spec.input_shape
    if shape and all(isinstance(s, (tuple, list)) for s in shape):
        return [tuple(int(v) for v in s) for s in shape]  # type: ignore[union-attr]
    return [tuple(int(v) for v in shape)]  # type: ignore[arg-type]


def shapes(arrays: list[Any]) -> str:
    return ", ".join(str(tuple(a.shape)) for a in arrays) or "none"


def _random_ids(mx: Any, shape: tuple[int, ...], classes: int, ctx: Any, dtype: str) -> Any:
    import numpy as np

    rng = np.random.RandomState(0)
    return mx.nd.array(rng.randint(0, max(classes, 1), size=shape), ctx=ctx, dtype=dtype)


def user_labels(mx: Any, spec: PrepareSpec) -> list[Any]:
    """``labels=`` as a list of NDArrays on the spec's device."""
    given = spec.labels
    if callable(given) and not hasattr(given, "asnumpy"):
        given = given(spec.batch_size, spec.ctx, spec.dtype)
    arrays = list(given) if isinstance(given, (list, tuple)) else [given]
    for i, a in enumerate(arrays):
        if not (hasattr(a, "asnumpy") and hasattr(a, "as_in_context")):
            raise SpecError(
                f"labels[{i}] is a {type(a).__name__}, not an NDArray; pass {_LABELS_HELP}"
            )
    return [a.as_in_context(spec.ctx) for a in arrays]


def _sum(values: list[Any]) -> Any:
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def classification(mx: Any, outs: list[Any], spec: PrepareSpec) -> Training:
    classes = spec.num_classes or int(outs[0].shape[-1])
    labels = [_random_ids(mx, (spec.batch_size,), classes, spec.ctx, spec.dtype)]
    if spec.loss is not None:
        return Training(labels, spec.loss, "classification, user loss")
    ce = mx.gluon.loss.SoftmaxCrossEntropyLoss()

    def loss(*args: Any) -> Any:
        return ce(args[0], args[-1])  # the first output against the labels, as before

    return Training(labels, loss, "classification: softmax cross-entropy")


def segmentation(mx: Any, outs: list[Any], spec: PrepareSpec) -> Training:
    """Labels (batch, H, W) of class ids from the first output (batch, classes, H, W); the
    default loss adds auxiliary outputs of the same shape at GluonCV's weight (FCN's aux head)."""
    first = outs[0]
    if len(first.shape) != 4:
        raise LossShapeError(
            f'task="segmentation" expects the first output to be (batch, classes, H, W); the '
            f"model's outputs are {shapes(outs)}. For other layouts pass {_LABELS_HELP}"
        )
    batch, classes, height, width = (int(v) for v in first.shape)
    classes = spec.num_classes or classes
    labels = [_random_ids(mx, (batch, height, width), classes, spec.ctx, spec.dtype)]
    if spec.loss is not None:
        return Training(labels, spec.loss, "segmentation, user loss")
    ce = mx.gluon.loss.SoftmaxCrossEntropyLoss(axis=1)
    aux = [i for i, o in enumerate(outs[1:], 1) if tuple(o.shape) == tuple(first.shape)]

    def loss(*args: Any) -> Any:
        label = args[-1]
        return _sum([ce(args[0], label)] + [AUX_WEIGHT * ce(args[i], label) for i in aux])

    return Training(labels, loss, "segmentation: pixel-wise softmax cross-entropy")


def synthetic_boxes(batch: int, width: int, height: int, classes: int) -> Any:
    """Ground truth for ``batch`` images: ``(batch, BOXES_PER_IMAGE, 5)`` of x1, y1, x2, y2 in
    pixels and a class id, fixed by a seed (the targets are made once, outside the timing)."""
    import numpy as np

    rng = np.random.RandomState(0)
    sides = rng.uniform(0.15, 0.5, size=(batch, BOXES_PER_IMAGE, 2))
    corners = rng.uniform(0.0, 1.0, size=(batch, BOXES_PER_IMAGE, 2)) * (1.0 - sides)
    scale = np.array([width, height], dtype="float64")
    ids = rng.randint(0, max(classes, 1), size=(batch, BOXES_PER_IMAGE, 1))
    return np.concatenate([corners * scale, (corners + sides) * scale, ids], axis=-1)


def detection(mx: Any, outs: list[Any], spec: PrepareSpec) -> Training:
    """SSD targets as GluonCV's train_ssd.py makes them: the anchors of ``net(x)`` in training
    mode, boxes matched by `SSDTargetGenerator` with `SSDDefaultTrainTransform`'s settings
    (IoU 0.5, box norm (0.1, 0.1, 0.2, 0.2), no negative mining), loss `SSDMultiBoxLoss`."""
    if len(outs) != 3 or len(outs[2].shape) != 3 or int(outs[2].shape[-1]) != 4:
        raise LossShapeError(
            'task="detection" makes SSD targets: the network in training mode must return '
            "(cls_preds, box_preds, anchors) like GluonCV's SSD; its outputs are "
            f"{shapes(outs)}. For another detector pass {_LABELS_HELP}"
        )
    try:
        from gluoncv.loss import SSDMultiBoxLoss
        from gluoncv.model_zoo.ssd.target import SSDTargetGenerator
    except ImportError as exc:
        raise SpecError(
            f"task=\"detection\" needs GluonCV: pip install 'pytest-mxperf[gluoncv]' ({exc})"
        ) from None
    import numpy as np

    cls_preds, _, anchors = outs
    shape = input_shapes(spec)[0]
    height, width = int(shape[-2]), int(shape[-1])
    classes = spec.num_classes or int(cls_preds.shape[-1]) - 1  # class 0 is background
    generator = SSDTargetGenerator(
        iou_thresh=0.5, stds=(0.1, 0.1, 0.2, 0.2), negative_mining_ratio=-1
    )
    cpu_anchors = anchors.as_in_context(mx.cpu())
    cls_targets, box_targets = [], []
    for truth in synthetic_boxes(spec.batch_size, width, height, classes):
        gt_boxes = mx.nd.array(truth[np.newaxis, :, :4])
        gt_ids = mx.nd.array(truth[np.newaxis, :, 4:5])
        cls_t, box_t, _ = generator(cpu_anchors, None, gt_boxes, gt_ids)
        cls_targets.append(cls_t[0])
        box_targets.append(box_t[0])
    labels = [
        mx.nd.stack(*cls_targets).as_in_context(spec.ctx),
        mx.nd.stack(*box_targets).as_in_context(spec.ctx),
    ]
    if spec.loss is not None:
        return Training(labels, spec.loss, "detection (SSD targets), user loss")
    mbox = SSDMultiBoxLoss()

    def loss(cls_pred: Any, box_pred: Any, _anchors: Any, cls_t: Any, box_t: Any) -> Any:
        sum_loss, _cls_loss, _box_loss = mbox(cls_pred, box_pred, cls_t, box_t)
        return sum_loss

    return Training(labels, loss, "detection: SSD targets, SSDMultiBoxLoss")


_BY_TASK = {"classification": classification, "segmentation": segmentation, "detection": detection}


def training(mx: Any, outs: list[Any], spec: PrepareSpec) -> Training:
    """Labels and loss for a training step whose network gave ``outs`` in training mode."""
    if spec.labels is None:
        return _BY_TASK[spec.task](mx, outs, spec)
    labels = user_labels(mx, spec)
    if spec.loss is not None:
        return Training(labels, spec.loss, "user labels and loss")
    if spec.task == "segmentation":
        ce = mx.gluon.loss.SoftmaxCrossEntropyLoss(axis=1)
    else:
        ce = mx.gluon.loss.SoftmaxCrossEntropyLoss()

    def loss(*args: Any) -> Any:
        return ce(args[0], args[-1])

    return Training(labels, loss, "user labels, softmax cross-entropy")


def mismatch(exc: BaseException, outs: list[Any], setup: Training, spec: PrepareSpec) -> str:
    """Why the loss failed on these outputs and labels, and how to fix it."""
    said = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    detail = next((line for line in said if "shape" in line.lower()), said[0] if said else "")
    while detail.startswith(f"{type(exc).__name__}: "):
        detail = detail[len(type(exc).__name__) + 2 :]
    if spec.loss is None and spec.labels is None:
        used = f'the default loss of task="{spec.task}" ({_TASK_LOSS[spec.task]})'
    else:
        used = "the loss"
    made = "labels=" if spec.labels is not None else f'task="{spec.task}"'
    others = " or ".join(f'task="{t}"' for t in TASKS if t != spec.task)
    return (
        f"{used} does not fit the model: outputs {shapes(outs)}; labels {shapes(setup.labels)} "
        f"(from {made}). Pass {others} if the model is of that kind, or {_LABELS_HELP}. "
        f"({type(exc).__name__}: {detail[:300]})"
    )


def trial(mx: Any, outs: list[Any], setup: Training, spec: PrepareSpec) -> None:
    """Call the loss once on the outputs and labels (outside the timing), so a shape mismatch
    becomes a `LossShapeError` that says what to change instead of MXNet's message alone."""
    try:
        for value in _arrays(setup.loss(*outs, *setup.labels)):
            if hasattr(value, "wait_to_read"):
                value.wait_to_read()
    except (mx.base.MXNetError, TypeError, ValueError, IndexError) as exc:
        if looks_like_oom(exc, mx.base.MXNetError):
            raise
        raise LossShapeError(mismatch(exc, outs, setup, spec)) from exc


def _arrays(out: Any) -> list[Any]:
    """The arrays of a model or loss output, out of nested lists and tuples."""
    if out is None:
        return []
    if isinstance(out, (list, tuple)):
        return [o for item in out for o in _arrays(item)]
    return [out]
