"""The projection of a paired comparison's rounds: how many rounds would likely decide an
undecided estimate, and whether more rounds could still fail it (the decision itself, and when to
stop, are in `pytest_mxperf.judging.pairstats`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pytest_mxperf.judging.tdist import t_quantile

if TYPE_CHECKING:
    from pytest_mxperf.judging.pairstats import PairedEstimate

#: Cap of :attr:`PairedEstimate.suggested_rounds`.
MAX_SUGGESTED_ROUNDS = 1000


def half_width(confidence: float, sd: float, n: int, df: int) -> float:
    """Half-width, on the log scale, of the two-sided ``confidence`` t interval (``df`` degrees
    of freedom) of the mean of ``n`` rounds whose per-round SD is ``sd``."""
    return t_quantile(0.5 + confidence / 2.0, df) * sd / math.sqrt(n)


def suggest_rounds(
    mean: float,
    sd: float,
    done: tuple[int, int],
    levels: tuple[float, float],
    min_effect: float,
) -> int:
    # The 99% interval decides once its half-width drops below the distance from the estimate
    # to 1 (REGRESSED/IMPROVED); the equivalence interval once its half-width drops below the
    # distance from the estimate down to ``1 - min_effect`` (SAME or NOT_SLOWER: its lower end
    # clears the loss worth failing for). Whichever happens first. ``done`` is the rounds so
    # far and the interval's degrees of freedom, which grow in proportion.
    n, df = done
    confidence, same_level = levels
    band = mean - math.log(1.0 - min_effect)
    for m in range(n + 1, MAX_SUGGESTED_ROUNDS + 1):
        df_m = projected_df(df, n, m)
        if half_width(confidence, sd, m, df_m) < abs(mean):
            return m
        if half_width(same_level, sd, m, df_m) < band:
            return m
    return MAX_SUGGESTED_ROUNDS


def projected_df(df: int, n: int, m: int) -> int:
    """Degrees of freedom after ``m`` rounds, from ``df`` after ``n``: ``m - 1`` when the
    rounds' spread set them, in proportion to the rounds when the block pairs' did."""
    return m - 1 if df <= n - 1 else max(m - 1, df * m // n)


def could_still_regress(estimate: PairedEstimate, more_rounds: int) -> bool:
    """Could up to ``more_rounds`` more rounds still decide REGRESSED for an UNKNOWN estimate?

    Futility, for :func:`pytest_mxperf.paired.more_rounds.worth_more_rounds`: the interval at ``m``
    rounds is projected with the per-round SD measured so far and the estimate moved one
    standard error further down (in favour of a regression, so that a real loss that was only
    unlucky in its first rounds keeps its rounds). False when no ``m`` up to
    ``n_rounds + more_rounds`` would put the whole interval below 1 with its lower end at
    ``1 - min_effect`` or lower: then more rounds would cost time and could not fail the case.
    A batch-1 case whose rounds swing by 7% around -1% is such a case; a 5% loss at 1-2% per
    round is not.
    """
    n = estimate.n_rounds
    sd = estimate.sd
    mean = math.log(estimate.ratio) - sd / math.sqrt(n)
    floor = math.log(1.0 - estimate.min_effect)
    for m in range(n + 1, n + more_rounds + 1):
        half = half_width(estimate.confidence, sd, m, projected_df(estimate.df, n, m))
        if mean + half < 0.0 and mean - half <= floor:
            return True
    return False
