"""Cost arithmetic: dollars per million images, time and dollars per epoch."""

from __future__ import annotations

import math

import pytest

from pytest_mxperf.reporting.cost import (
    IMAGENET_TRAIN_IMAGES,
    cost,
    dollars_per_million_images,
    epoch_dollars,
    epoch_seconds,
    format_duration,
)


def test_dollars_per_million_images() -> None:
    # 1000 img/s = 3.6 M images per hour: a $3.60/h machine costs $1 per million.
    assert dollars_per_million_images(1000.0, 3.60) == pytest.approx(1.0)
    # Twice the throughput halves the cost; twice the price doubles it.
    assert dollars_per_million_images(2000.0, 3.60) == pytest.approx(0.5)
    assert dollars_per_million_images(1000.0, 7.20) == pytest.approx(2.0)


def test_imagenet_epoch() -> None:
    assert IMAGENET_TRAIN_IMAGES == 1_281_167
    # ResNet-50 training on one V100 in the published tables: 298.51 img/s at batch 32.
    seconds = epoch_seconds(298.51)
    assert seconds == pytest.approx(1_281_167 / 298.51)
    assert format_duration(seconds) == "1 h 11 min"
    # At $3.06 per hour (the on-demand price of such a machine, say):
    assert epoch_dollars(298.51, 3.06) == pytest.approx(seconds / 3600 * 3.06)
    assert epoch_dollars(298.51, 3.06, epoch_size=1000) == pytest.approx(
        1000 / 298.51 / 3600 * 3.06
    )


def test_cost_record_and_description() -> None:
    c = cost(1000.0, 3.60, epoch_size=IMAGENET_TRAIN_IMAGES)
    assert c.dollars_per_million_images == pytest.approx(1.0)
    assert c.epoch_seconds == pytest.approx(1281.167)
    assert c.epoch_dollars == pytest.approx(1.281167)
    assert c.describe() == (
        "$1.00 per million images; ImageNet epoch (1,281,167 images) 21 min 21 s, $1.28"
    )
    plain = cost(500.0, 1.0)
    assert plain.epoch_seconds is None and plain.epoch_dollars is None
    assert plain.describe() == "$0.56 per million images"
    assert (
        cost(10.0, 1.0, epoch_size=50_000)
        .describe()
        .endswith("epoch (50,000 images) 1 h 23 min, $1.39")
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (42.4, "42 s"), (200, "3 min 20 s"), (3600, "1 h 0 min"), (183_600, "2 d 3 h")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_inputs_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="images_per_sec must be a positive number"):
        dollars_per_million_images(bad, 1.0)
    with pytest.raises(ValueError, match="price_per_hour must be a positive number"):
        dollars_per_million_images(1.0, bad)
    with pytest.raises(ValueError, match="epoch_size"):
        epoch_seconds(1.0, epoch_size=0)
