"""The projection of a paired comparison's rounds: how many rounds would likely decide an
undecided estimate, and an interval's half width at a number of rounds (the decision itself is in
`pytest_mxperf.judging.pairstats`; whether more rounds could still fail a case, in
`pytest_mxperf.paired.more_rounds`)."""

from __future__ import annotations

import math

from pytest_mxperf.judging.tdist import t_quantile

#: Cap of `pairstats.PairedEstimate.suggested_rounds`.
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
