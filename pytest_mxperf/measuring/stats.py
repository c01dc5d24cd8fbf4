"""Small robust statistics on block throughputs and block-pair log ratios (no numpy needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Normal-theory factors: SD from the median absolute deviation, and the standard error of a
# median relative to that of a mean (sqrt(pi / 2)).
_MAD_TO_SD = 1.4826
_MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)


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


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample SD (``n - 1``) of at least two values."""
    n = len(values)
    mean = math.fsum(values) / n
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))


#: Share of the block pairs left out at each end of a round's trimmed mean.
TRIM = 0.2


def trim_count(n: int) -> int:
    return int(TRIM * n)


def trimmed_mean(values: Sequence[float]) -> float:
    """Mean of ``values`` without the lowest and highest :data:`TRIM` share (20%)."""
    ordered = sorted(values)
    k = trim_count(len(ordered))
    kept = ordered[k : len(ordered) - k]
    return math.fsum(kept) / len(kept)


def trimmed_mean_se(values: Sequence[float]) -> float:
    """Standard error of :func:`trimmed_mean` (Tukey and McLaughlin): the SD of the values
    winsorized at the trimmed share, over ``(1 - 2 * TRIM) * sqrt(n)``. One block a burst slowed
    by half moves it as much as the next-worst block, where it would dominate a plain SD."""
    n = len(values)
    if n < 2:
        return 0.0
    ordered = sorted(values)
    k = trim_count(n)
    low, high = ordered[k], ordered[n - 1 - k]
    winsorized = [min(max(x, low), high) for x in ordered]
    sd = mean_sd(winsorized)[1]
    return sd / ((1.0 - 2.0 * k / n) * math.sqrt(n))


def median_noise(blocks: Sequence[float]) -> float:
    """Relative standard error of the median of block rates (0 for fewer than two blocks).

    From the MAD of the log rates, robust to the odd slow block that the median ignores too.
    """
    if len(blocks) < 2:
        return 0.0
    logs = [math.log(b) for b in blocks]
    mid = median(logs)
    sd = _MAD_TO_SD * median([abs(x - mid) for x in logs])
    return _MEDIAN_SE_FACTOR * sd / math.sqrt(len(blocks))
