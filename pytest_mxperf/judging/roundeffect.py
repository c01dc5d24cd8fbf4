"""The round effect of a paired run: the spread between rounds that block noise does not
explain, estimated over all the run's cases, and the equivalence interval's SD it gives a case.

The spread between rounds of one case, from two or three rounds, is itself a very uncertain
number (1 or 2 degrees of freedom: a t quantile of 12.7 at 95%), and by chance it often exceeds
what the rounds' block pairs predict. The cases of one run share its rounds, its processes and
its machine, so the part of the between-round spread that block noise does not explain (the
*round effect*: a process that runs a little slow all round) is estimated from all of them
together (:func:`round_noise`, one degree of freedom per case and extra round). A case whose
rounds disagree more than its blocks predict (without the model, its equivalence interval would
take that spread and ``n - 1`` degrees of freedom), but no more than the model's 99% chi-square
bound allows, takes the model's SD instead, its block noise and the round effect, with their
Satterthwaite degrees of freedom (the round effect counts as uncertain as the spread it was
taken from, so a case alone in its run gets ``n - 1``, as without the model); a case whose rounds
disagree more keeps its own spread. The 99% interval that fails a case always takes the case's
own spread: the model never fails a case.

Replayed on 165 recorded A/A cases of 11 runs (scripts/replay_pairs.py), with the equivalence
level at 95% (`pairstats.SAME_CONFIDENCE`; cases without block pairs, or alone, keep 90%)
identical code took 2.16 rounds on average where it took 2.39 (90%, no model), and a 5% loss
was caught 92.6% of the time where it was 90.1% (at 90% with the model: 2.08 rounds, but
88.5%).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pytest_mxperf.judging.tdist import chi2_quantile
from pytest_mxperf.measuring.stats import PairedBlocks, mean_sd

#: A case's own spread between rounds beyond this quantile of the pooled model's chi-square is
#: its own: its equivalence interval does not take the run's round effect.
POOLED_CHECK = 0.99


class Round(Protocol):
    """What the model reads of a paired round (`pairstats.PairedRound`)."""

    @property
    def blocks(self) -> PairedBlocks | None: ...

    @property
    def ratio(self) -> float: ...

    @property
    def within_noise(self) -> float: ...

    @property
    def within_df(self) -> int: ...

    @property
    def pooled(self) -> bool: ...


@dataclass(frozen=True)
class RoundNoise:
    """The round effect of one run (:func:`round_noise`): the SD of a round's log ratio that the
    block noise does not explain, its degrees of freedom, and the pooled SD between rounds it
    was taken from (what makes it uncertain: its variance is about ``2 * spread**4 / df``)."""

    sd: float
    df: int
    spread: float


def poolable(rounds: Sequence[Round]) -> bool:
    """Whether a case's rounds may give and take the run's round effect: each has block pairs
    and may be pooled (`pairstats.PairedRound.pooled`)."""
    return all(rnd.blocks is not None and rnd.pooled for rnd in rounds)


def round_noise(cases: Iterable[Sequence[Round]]) -> RoundNoise | None:
    """The round effect of a run from the rounds of its cases (each a sequence of rounds of one
    case): the between-round variance of each case's log ratios less the variance its block
    pairs explain, pooled with weights ``rounds - 1``, floored at 0. Only cases of two or more
    rounds that all have block pairs and may be pooled count. None: no such case."""
    between, excess, df = 0.0, 0.0, 0
    for rounds in cases:
        if len(rounds) < 2 or not poolable(rounds):
            continue
        _, sd_between = mean_sd([math.log(rnd.ratio) for rnd in rounds])
        within = math.fsum(rnd.within_noise**2 for rnd in rounds) / len(rounds)
        between += (len(rounds) - 1) * sd_between**2
        excess += (len(rounds) - 1) * (sd_between**2 - within)
        df += len(rounds) - 1
    if df == 0:
        return None
    return RoundNoise(math.sqrt(max(0.0, excess / df)), df, math.sqrt(between / df))


def pooled_sd(
    rounds: Sequence[Round],
    noise: RoundNoise | None,
    spreads: tuple[float, float],
    floor: float,
) -> tuple[float, int] | None:
    """The equivalence interval's SD and degrees of freedom from the run's round effect, or None
    when it does not apply: no round effect, a round without block pairs (or one that may not
    be pooled: `pairstats.PairedRound.pooled`), rounds that agree at
    least as well as their blocks predict (``spreads``: between, within; the blocks' noise
    sets the interval then), or a spread between this case's rounds beyond the model's
    :data:`POOLED_CHECK` chi-square bound."""
    sd_between, sd_within = spreads
    if noise is None or sd_between <= sd_within or not poolable(rounds):
        return None
    n = len(rounds)
    within = sd_within**2
    sd = max(math.sqrt(within + noise.sd**2), floor)
    if (n - 1) * sd_between**2 > chi2_quantile(POOLED_CHECK, n - 1) * sd**2:
        return None
    within_df = sum(rnd.within_df for rnd in rounds)
    # Satterthwaite: the degrees of freedom of the sum of the two estimated variances. The round
    # effect is a difference taken from the spread between rounds, so it is as uncertain as that
    # spread (not as a variance of its own size would be): one case alone gets 1, as without it.
    parts = within**2 / max(within_df, 1) + noise.spread**4 / noise.df
    df = int((within + noise.sd**2) ** 2 / parts) if parts > 0 else within_df
    return sd, max(n - 1, df)
