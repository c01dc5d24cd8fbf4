"""Small robust statistics on block throughputs (no numpy needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method)."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def rel_iqr(values: Sequence[float]) -> float:
    """Interquartile range relative to the median; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mid = median(values)
    if mid == 0:
        return math.inf
    return (quantile(values, 0.75) - quantile(values, 0.25)) / mid


def rel_spread(values: Sequence[float]) -> float:
    """(max - min) / median of a few run medians; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mid = median(values)
    return (max(values) - min(values)) / mid if mid else math.inf
