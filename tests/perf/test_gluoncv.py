"""GluonCV detection and segmentation networks in the suite (issue #16): SSD inference and real
SSD training (class and box targets from the model's anchors, SSDMultiBoxLoss), and FCN
segmentation training (pixel-wise softmax cross-entropy, auxiliary head included).

Random weights, nothing downloaded. Needs ``pip install 'pytest-mxperf[cpu,gluoncv]'``; the
whole file skips with that reason without GluonCV. The quick selection runs reduced sizes
(SSD-300 VGG16 at 272 px, the smallest its last 3x3 valid convolution takes); ``--suite full``
runs SSD at 300x300 and 512x512 and FCN at 512x512.

No marker expects a published figure of these cases. The SSD training table the issue names (a
2017 field study: K520, GTX 1080, Titan X) is in expectations.csv under this model label; its
one-GPU rows (batch 16 and 32, 300x300, on those GPUs' hardware keys) reach the full selection's
SSD-300 training cases only as floors of the history report (``mxperf report --expectations``):
they were end-to-end training on VOC data with 2017's MXNet, not these synthetic steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip(
    "gluoncv", reason="GluonCV is not installed: pip install 'pytest-mxperf[cpu,gluoncv]'"
)

TASK = {"ssd": "detection", "fcn": "segmentation"}
#: The input size a network is named for; other sizes label the case ``<name>-<size>px``.
NAMED_SIZE = {"ssd_300_vgg16_atrous_voc": 300, "ssd_512_vgg16_atrous_voc": 512}


@dataclass(frozen=True)
class DetSegCase:
    """A GluonCV network, mode, batch size and square input size."""

    model: str
    mode: str
    batch_size: int
    size: int

    @property
    def label(self) -> str:
        named = NAMED_SIZE.get(self.model)
        return self.model if self.size == named else f"{self.model}-{self.size}px"

    @property
    def task(self) -> str:
        return TASK[self.model.split("_")[0]]

    @property
    def id(self) -> str:
        return f"{self.label}-{self.mode}-bs{self.batch_size}"


QUICK = (
    DetSegCase("ssd_300_vgg16_atrous_voc", "inference", 1, 272),
    DetSegCase("ssd_300_vgg16_atrous_voc", "training", 1, 272),
    DetSegCase("fcn_resnet50_voc", "inference", 1, 128),
    DetSegCase("fcn_resnet50_voc", "training", 2, 128),
)
BATCHES = (1, 2, 4, 8, 16, 32)


def full() -> tuple[DetSegCase, ...]:
    cases = []
    for model, size in (
        ("ssd_300_vgg16_atrous_voc", 300),
        ("ssd_512_vgg16_atrous_voc", 512),
        ("fcn_resnet50_voc", 512),
    ):
        for mode in ("inference", "training"):
            cases += [DetSegCase(model, mode, b, size) for b in BATCHES]
    return tuple(cases)


def build(case: DetSegCase) -> Any:
    from gluoncv import model_zoo

    extra = {"crop_size": case.size, "base_size": case.size} if case.task == "segmentation" else {}
    return model_zoo.get_model(case.model, pretrained=False, pretrained_base=False, **extra)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "detseg" in metafunc.fixturenames:
        cases = full() if metafunc.config.getoption("suite") == "full" else QUICK
        metafunc.parametrize("detseg", cases, ids=[c.id for c in cases])


def test_detection_segmentation_throughput(mxperf: Any, mx_ctx: Any, detseg: DetSegCase) -> None:
    measure = getattr(mxperf, detseg.mode)
    options: dict[str, Any] = {"task": detseg.task} if detseg.mode != "inference" else {}
    result = measure(
        build(detseg),
        batch_size=detseg.batch_size,
        ctx=mx_ctx,
        input_shape=(3, detseg.size, detseg.size),
        model=detseg.label,
        **options,
    )
    assert result.status in ("ok", "oom"), result.error
