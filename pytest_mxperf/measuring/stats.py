"""Small robust statistics on block throughputs and block-pair log ratios (no numpy needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

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


#: A block slower than its side's median by more than this many robust SDs (from the MAD of
#: the side's log rates) is an outlier: a burst, or a lump of the code's own work. A
#: neighbour's burst takes a third or more off a block, many times a quiet side's own spread;
#: at 3 SDs a quiet REV's ordinary slow blocks matched HEAD's lumps and hid part of a lumpy
#: loss (the replayed figures: docs/measurements.md, "Moved from code comments").
OUTLIER_SDS = 8.0
#: Fewer blocks than this give no outliers (a MAD of 3 or 5 blocks can be next to nothing, and a
#: lump matched against an ordinary block would vanish from the ratio and from its error, which
#: is what buys the round more pairs); nor does a spread below this robust SD (log scale).
MIN_OUTLIER_BLOCKS = 7
MIN_OUTLIER_SD = 0.005


@dataclass(frozen=True)
class PairedBlocks:
    """HEAD/REV over the blocks two sides timed in turns (`paired_blocks`).

    :param log_ratio: ``log`` of HEAD's throughput over REV's.
    :param se: its standard error.
    :param used: the pairs it counts (the others: outliers matched between the sides).
    """

    log_ratio: float
    se: float
    used: int


def paired_blocks(rev: Sequence[float], head: Sequence[float]) -> PairedBlocks:
    """HEAD/REV throughput over blocks timed in turns: ``rev[i]`` and ``head[i]`` are the
    items/s of pair ``i`` (at least two).

    Each side's throughput is its items over its time, as a plain benchmark loop reports it
    (the harmonic mean of its block rates: a side times the same items in every block). A burst
    from outside slows a block of either side alike; a loss that comes in lumps (a step in
    every 20 that does twice the work) slows about a third of HEAD's 0.1 s blocks and none of
    REV's. So outliers (:data:`OUTLIER_SDS`) are left out only in matched numbers: as many of
    HEAD's slowest as REV has, and as many of REV's as HEAD has. What both sides have alike is
    the machine and goes; what one side has in excess is its code and stays, where a trimmed
    mean or a median would leave a lumpy loss out. On identical code the rule is the same for
    both sides, so the ratio stays unbiased.

    The error is the delta method's: the SD of ``t_rev_i / mean(t_rev) - t_head_i / mean(t_head)``
    (``t = 1 / rate``) over the pairs kept, over ``sqrt(n)``; a burst left in widens it, and the
    round buys more pairs (`turns.Conductor`)."""
    n = len(rev)
    if n < 2 or len(head) != n:
        raise ValueError(f"paired blocks: need two or more pairs, got {n} and {len(head)}")
    slow_rev, slow_head = _outliers(rev), _outliers(head)
    matched = min(len(slow_rev), len(slow_head))
    left_out = set(slow_rev[:matched]) | set(slow_head[:matched])
    times = [(1.0 / x, 1.0 / y) for x, y in zip(rev, head)]
    kept = [t for i, t in enumerate(times) if i not in left_out]
    if len(kept) < 2:
        kept = times
    m = len(kept)
    mean_rev = math.fsum(a for a, _ in kept) / m
    mean_head = math.fsum(b for _, b in kept) / m
    d = [a / mean_rev - b / mean_head for a, b in kept]
    se = math.sqrt(math.fsum(x * x for x in d) / (m - 1) / m)
    return PairedBlocks(math.log(mean_rev / mean_head), se, m)


def _outliers(rates: Sequence[float]) -> list[int]:
    """Indices of the blocks slower than the side's median by more than :data:`OUTLIER_SDS`
    robust SDs (at least :data:`MIN_OUTLIER_SD` each), slowest first; none among fewer than
    :data:`MIN_OUTLIER_BLOCKS` blocks."""
    if len(rates) < MIN_OUTLIER_BLOCKS:
        return []
    logs = [math.log(r) for r in rates]
    mid = median(logs)
    sd = max(_MAD_TO_SD * median([abs(x - mid) for x in logs]), MIN_OUTLIER_SD)
    cut = mid - OUTLIER_SDS * sd
    return [i for i in sorted(range(len(logs)), key=logs.__getitem__) if logs[i] < cut]


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
