"""Statistics of paired runs: per round, REV's and HEAD's img/s measured back to back on this
machine; the estimate is the geometric mean of the per-round ratios HEAD/REV, with a
t-interval on their logs.

The round, not the block, is the unit: blocks of one process share that process's luck (thread
placement, memory layout, the machine's phase), so only repeated processes say how much a
figure moves. The per-round spread is floored by the blocks' own spread and a small constant,
so three identical rounds never give a zero-width interval.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Two-sided confidence of the interval a verdict rests on.
CONFIDENCE = 0.99
#: The smallest per-round spread (SD of log ratios) assumed, whatever the data say.
SD_FLOOR = 0.005
#: IQR / 1.349 is the SD of a normal distribution.
IQR_TO_SD = 1 / 1.349

# Student t quantiles for 0.975 and 0.995 (two-sided 95% and 99%), df 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
_T995 = (63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
         3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845,
         2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750)  # fmt: skip


def t_quantile(confidence: float, df: int) -> float:
    """The two-sided Student t quantile for 95% or 99% confidence (normal beyond df 30)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    table = {0.95: (_T975, 1.960), 0.99: (_T995, 2.576)}.get(round(confidence, 4))
    if table is None:
        raise ValueError(f"confidence must be 0.95 or 0.99, got {confidence}")
    values, normal = table
    return values[df - 1] if df <= len(values) else normal


class Decision(str, enum.Enum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    SAME = "same"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PairedEstimate:
    """HEAD/REV img/s: estimate, confidence interval, and what they decide."""

    ratio: float
    low: float
    high: float
    n_rounds: int
    ratios: tuple[float, ...]
    decision: Decision
    #: For an undecided case: about how many rounds would give a decision.
    suggested_rounds: int | None = None


def estimate(
    rev: Sequence[float],
    head: Sequence[float],
    *,
    rev_noise: Sequence[float] = (),
    head_noise: Sequence[float] = (),
    min_effect: float = 0.05,
    confidence: float = CONFIDENCE,
) -> PairedEstimate:
    """Estimate HEAD/REV from per-round medians ``rev[i]``, ``head[i]`` and decide.

    :param rev_noise: per round, the relative IQR of REV's blocks (the within-process noise).
    :param head_noise: the same for HEAD.

    REGRESSED when the whole interval lies below 1 (the slowdown is real) and a drop of at
    least ``min_effect`` is not ruled out (the interval reaches ``1 - min_effect``); IMPROVED
    symmetrically; SAME when the interval lies within ``1 +- min_effect``, or is confidently on
    one side of 1 but short of the minimum effect; else UNKNOWN.
    """
    if len(rev) != len(head) or not rev:
        raise ValueError(f"need one REV and one HEAD figure per round, got {len(rev)}, {len(head)}")
    if any(not (v > 0 and math.isfinite(v)) for v in (*rev, *head)):
        raise ValueError("images/sec must be positive and finite in every round")
    logs = [math.log(b / a) for a, b in zip(rev, head)]
    n = len(logs)
    mean = sum(logs) / n
    sample_sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1)) if n > 1 else 0.0
    within = [math.hypot(a * IQR_TO_SD, b * IQR_TO_SD) for a, b in zip(rev_noise, head_noise)]
    floor = max(SD_FLOOR, sorted(within)[len(within) // 2] if within else 0.0)
    sd = max(sample_sd, floor)
    half = t_quantile(confidence, max(1, n - 1)) * sd / math.sqrt(n)
    low, high = math.exp(mean - half), math.exp(mean + half)
    decision = decide(low, high, min_effect)
    suggested = None
    if decision == Decision.UNKNOWN:
        # Rounds for a half-width of about half the minimum effect.
        z = t_quantile(confidence, 30)
        suggested = min(50, max(n + 1, math.ceil((2 * z * sd / min_effect) ** 2)))
    return PairedEstimate(
        ratio=math.exp(mean),
        low=low,
        high=high,
        n_rounds=n,
        ratios=tuple(math.exp(x) for x in logs),
        decision=decision,
        suggested_rounds=suggested,
    )


def decide(low: float, high: float, min_effect: float) -> Decision:
    """The decision of an interval ``[low, high]`` of HEAD/REV (see `estimate`)."""
    if high < 1:
        return Decision.REGRESSED if low <= 1 - min_effect else Decision.SAME
    if low > 1:
        return Decision.IMPROVED if high >= 1 + min_effect else Decision.SAME
    if low > 1 - min_effect and high < 1 + min_effect:
        return Decision.SAME
    return Decision.UNKNOWN
