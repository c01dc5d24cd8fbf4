"""What a throughput costs: dollars per million images and time and dollars per epoch, from
images/sec and the price of the machine per hour. Pure arithmetic."""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Images in the ImageNet-1k (ILSVRC 2012) training set: the usual epoch.
IMAGENET_TRAIN_IMAGES = 1_281_167
SECONDS_PER_HOUR = 3600.0


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def dollars_per_million_images(images_per_sec: float, price_per_hour: float) -> float:
    """Cost of processing one million images at ``images_per_sec`` on a machine billed at
    ``price_per_hour`` dollars."""
    rate = _positive("images_per_sec", images_per_sec)
    price = _positive("price_per_hour", price_per_hour)
    return price * 1e6 / (rate * SECONDS_PER_HOUR)


def epoch_seconds(images_per_sec: float, epoch_size: int = IMAGENET_TRAIN_IMAGES) -> float:
    """Seconds for one pass over ``epoch_size`` images."""
    rate = _positive("images_per_sec", images_per_sec)
    return _positive("epoch_size", epoch_size) / rate


def epoch_dollars(
    images_per_sec: float, price_per_hour: float, epoch_size: int = IMAGENET_TRAIN_IMAGES
) -> float:
    """Dollars for one pass over ``epoch_size`` images."""
    price = _positive("price_per_hour", price_per_hour)
    return epoch_seconds(images_per_sec, epoch_size) / SECONDS_PER_HOUR * price


@dataclass(frozen=True)
class Cost:
    """The cost figures of one throughput."""

    images_per_sec: float
    price_per_hour: float
    dollars_per_million_images: float
    epoch_size: int | None = None
    epoch_seconds: float | None = None
    epoch_dollars: float | None = None

    def describe(self) -> str:
        """One line, e.g. ``$1.23 per million images; ImageNet epoch 1 h 52 min, $2.62``."""
        text = f"${self.dollars_per_million_images:,.2f} per million images"
        if self.epoch_seconds is not None and self.epoch_dollars is not None:
            name = "ImageNet epoch" if self.epoch_size == IMAGENET_TRAIN_IMAGES else "epoch"
            text += (
                f"; {name} ({self.epoch_size:,} images) {format_duration(self.epoch_seconds)}, "
                f"${self.epoch_dollars:,.2f}"
            )
        return text


def cost(images_per_sec: float, price_per_hour: float, epoch_size: int | None = None) -> Cost:
    """All cost figures at once; the epoch figures only when ``epoch_size`` is given."""
    per_million = dollars_per_million_images(images_per_sec, price_per_hour)
    if epoch_size is None:
        return Cost(float(images_per_sec), float(price_per_hour), per_million)
    return Cost(
        float(images_per_sec),
        float(price_per_hour),
        per_million,
        epoch_size,
        epoch_seconds(images_per_sec, epoch_size),
        epoch_dollars(images_per_sec, price_per_hour, epoch_size),
    )


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 20 s``, ``1 h 52 min``, ``2 d 3 h``: two units at most."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
    s = round(seconds)
    days, rest = divmod(s, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"
