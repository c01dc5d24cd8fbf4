"""Statistics and the decision of a paired A/B run: is HEAD slower than REV on this machine?

Each round measures one case once for REV's code and once for HEAD's, in separate processes,
the order alternating between rounds. The unit of evidence is the per-round ratio
``r_i = head_i / rev_i`` of the two medians (images/sec): the pairing cancels what both sides of
a round share (the machine, its current load, its clock), which is what makes stored figures
from other hosts useless as evidence.

Estimate: the geometric mean of the ratios. Interval: a Student t interval on ``log r_i`` with
``n - 1`` degrees of freedom, whose per-round standard deviation is floored by the noise within
each process (from the block rates) and by a small fixed floor, so that a few rounds that agree
by chance never produce a confidently narrow interval.

Decision, with ``e = min_effect``, in this order:

- SAME: the narrower equivalence interval (:data:`SAME_CONFIDENCE`, two one-sided tests at
  2.5% each) lies within ``(1 - e, 1 + e)``, including a real but confidently small change,
  which the verdict's message reports as "slower by about x%, less than the minimum effect".
  Failing a case takes the 99% interval; ruling out a change of ``e`` or more needs less
  certainty, so identical code is called the same in 2-3 rounds where it took more than 6 at
  99% (scripts/aa_check.py and ``tests/unit/paired/test_pair_simulations.py`` give the figures);
- REGRESSED: the whole interval is below 1 and it reaches ``1 - e`` or lower;
- IMPROVED: the whole interval is above 1 and it reaches ``1 + e`` or higher;
- NOT_SLOWER: the equivalence interval's lower end is above ``1 - e`` but its upper end is not
  below ``1 + e``: a loss of ``e`` or more is ruled out with the same certainty as for SAME
  (its lower one-sided test), and HEAD may be faster by more than ``e`` without the rounds to
  show it. A CI gate asks "is it slower?", so this passes too (the message says it may be
  faster). Each look errs on a loss of ``e`` no more often than SAME's lower test; the looks of
  added rounds add a little (``tests/unit/paired/test_pair_simulations.py``), and identical
  code on a noisy machine no longer needs the rounds to pin its upper end down;
- UNKNOWN otherwise: more rounds may decide (`pytest_mxperf.paired.more_rounds` says which,
  and stops early for a case that they could no longer fail); after the last round the caller
  reports the case as inconclusive, with :attr:`PairedEstimate.suggested_rounds`.

A case whose rounds disagree more than their block pairs predict takes, for its equivalence
interval, the run's *round effect* (`roundeffect`: the spread between rounds that block noise
does not explain, estimated over all the run's cases) instead of its own spread of ``n - 1``
degrees of freedom; the 99% interval that fails a case never does.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_mxperf.judging.pairplan import half_width, suggest_rounds
from pytest_mxperf.judging.roundeffect import RoundNoise, poolable, pooled_sd
from pytest_mxperf.measuring.stats import PairedBlocks, mean_sd, median_noise, paired_blocks

#: Default confidence level of the interval (two-sided).
CONFIDENCE = 0.99
#: Confidence of the equivalence interval that decides SAME (two-sided 95%: each one-sided test
#: at 2.5%) for a case of block pairs in a run whose round effect (`roundeffect`) other cases
#: stand behind (:data:`POOLED_DF_FOR_SAME`): with it this level catches more 5% losses than
#: 90% without it did, in fewer rounds for identical code.
SAME_CONFIDENCE = 0.95
#: ... and of every other case (:func:`default_same_level`), none of which leans on a round
#: effect from other cases: a case alone in its run, and a case whose rounds have no block pairs
#: (whole-case turns: input pipelines, data-parallel launches; rounds of medians), to which the
#: round effect never applies (at 95% both were too often inconclusive: docs/measurements.md).
UNPOOLED_SAME_CONFIDENCE = 0.90
#: Degrees of freedom the run's round effect must have from cases other than the one judged for
#: that case to be judged at :data:`SAME_CONFIDENCE` (four: e.g. four other cases of two rounds).
POOLED_DF_FOR_SAME = 4
#: Default smallest change worth failing for (5%).
MIN_EFFECT = 0.05
#: Default floor of the per-round SD of log ratios (0.5%): no interval is ever zero-width.
NOISE_FLOOR = 0.005


# --- records ---------------------------------------------------------------------------------


class Decision(enum.Enum):
    """What the paired rounds say about HEAD relative to REV."""

    SAME = "same"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    NOT_SLOWER = "not slower"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PairedRound:
    """One round of one case: each side's median images/sec and its block rates.

    :param rev: REV's median images/sec in this round.
    :param head: HEAD's median images/sec in this round.
    :param rev_blocks: REV's per-block images/sec (the within-process noise); may be empty.
    :param head_blocks: the same for HEAD.
    :param pairs: ``(rev_i, head_i)`` images/sec of the blocks the two sides timed in turns
        (lock-step sides, `pytest_mxperf.paired.turns`); when two or more are given, they make
        the round's ratio and its noise (`stats.paired_blocks`).
    """

    rev: float
    head: float
    rev_blocks: tuple[float, ...] = ()
    head_blocks: tuple[float, ...] = ()
    pairs: tuple[tuple[float, float], ...] = ()
    #: The round may share the run's round effect (`roundeffect`): False for an input pipeline
    #: timed in turns, whose rounds swing with its own source's random work (crops, decoding)
    #: more than a model's do; pooled with the models, it would narrow its own equivalence
    #: interval and widen theirs.
    pooled: bool = True

    @functools.cached_property
    def blocks(self) -> PairedBlocks | None:
        """The block pairs' throughput ratio and its error; None with fewer than two pairs
        (worked out once: the ratio, the noise and its degrees of freedom all read it)."""
        if len(self.pairs) < 2:
            return None
        rev, head = zip(*self.pairs)
        return paired_blocks(rev, head)

    @property
    def ratio(self) -> float:
        """HEAD/REV of this round: with block pairs, the ratio of the two sides' throughputs
        over them (a loss that comes in lumps is all in it, `stats.paired_blocks`); else the
        ratio of the two medians."""
        blocks = self.blocks
        return math.exp(blocks.log_ratio) if blocks else self.head / self.rev

    @property
    def within_noise(self) -> float:
        """SD of this round's log ratio that the noise within the round explains: the standard
        error of the block pairs' throughput ratio, or the two processes' own block noise."""
        blocks = self.blocks
        if blocks:
            return blocks.se
        return math.hypot(median_noise(self.rev_blocks), median_noise(self.head_blocks))

    @property
    def within_df(self) -> int:
        """Degrees of freedom of :attr:`within_noise` (0: none known, e.g. from medians)."""
        blocks = self.blocks
        return blocks.used - 1 if blocks else 0


@dataclass(frozen=True)
class PairedEstimate:
    """HEAD/REV throughput ratio of one case over paired rounds, with its interval and decision.

    :param ratio: geometric mean of the per-round ratios head/rev (< 1: HEAD is slower).
    :param low: lower end of the interval on the ratio.
    :param high: upper end.
    :param n_rounds: rounds used.
    :param ratios: the per-round ratios, in round order.
    :param decision: see the module docstring.
    :param suggested_rounds: for UNKNOWN, the rounds that would likely decide, assuming the
        current estimate and noise hold (capped at `pairplan.MAX_SUGGESTED_ROUNDS`); None otherwise.
    :param same_low: lower end of the equivalence interval (:data:`SAME_CONFIDENCE`).
    :param same_high: its upper end.
    :param sd: the per-round SD of log ratios used (after the floors).
    :param sd_between: the SD measured between rounds (0 for identical rounds).
    :param sd_within: the RMS within-process noise of the rounds.
    """

    ratio: float
    low: float
    high: float
    n_rounds: int
    ratios: tuple[float, ...]
    decision: Decision
    suggested_rounds: int | None
    confidence: float
    min_effect: float
    sd: float
    sd_between: float
    sd_within: float
    same_low: float = 0.0
    same_high: float = math.inf
    #: Degrees of freedom of the equivalence interval's t quantile (:func:`paired_estimate`).
    df: int = 1
    #: The equivalence interval's level (:func:`default_same_level`: :data:`SAME_CONFIDENCE`,
    #: or :data:`UNPOOLED_SAME_CONFIDENCE` for a case alone or without block pairs; capped at
    #: ``confidence``).
    same_level: float = SAME_CONFIDENCE
    #: The run's round effect, when the equivalence interval took it (`roundeffect`).
    pooled: RoundNoise | None = None
    #: The first paired run's estimate, when this one is the second run on fresh processes
    #: that a regression found by the first must pass (``--mxperf-pair-confirm``).
    first: PairedEstimate | None = None

    @property
    def change(self) -> float:
        """Relative change of HEAD against REV: -0.08 is 8% slower."""
        return self.ratio - 1.0

    def rules_out_wider(self, loss: float) -> bool:
        """Whether the equivalence interval rules out a loss of ``loss``, wider than the minimum
        effect: an arbitration whose stored threshold is that wide clears the case although it
        is undecided at the minimum effect (`decisions.decide_arbitration_pair`)."""
        return loss > self.min_effect and self.same_low > 1.0 - loss


# --- estimation ------------------------------------------------------------------------------


def decide(
    low: float,
    high: float,
    min_effect: float,
    same: tuple[float, float] | None = None,
) -> Decision:
    """The decision rule of the module docstring for an interval ``[low, high]`` on the ratio;
    ``same`` is the equivalence interval that decides SAME (default: ``[low, high]`` itself).
    SAME is asked first: a change the equivalence interval puts inside the minimum effect is
    not failed because the wider interval still reaches it (a certain 4% loss is "slower by
    about 4%", whether 2 rounds or 3 measured it)."""
    same_low, same_high = same or (low, high)
    if same_low > 1.0 - min_effect and same_high < 1.0 + min_effect:
        return Decision.SAME
    if high < 1.0 and low <= 1.0 - min_effect:
        return Decision.REGRESSED
    if low > 1.0 and high >= 1.0 + min_effect:
        return Decision.IMPROVED
    if same_low > 1.0 - min_effect:
        return Decision.NOT_SLOWER
    return Decision.UNKNOWN


def _degrees_of_freedom(rounds: Sequence[PairedRound], sd_between: float, sd_within: float) -> int:
    """The t quantile's degrees of freedom: those of whichever spread sets the interval.

    The interval takes the larger of the spread between rounds (``n - 1`` degrees of freedom)
    and the spread the rounds' own block pairs predict for a round (their degrees of freedom
    summed: ``pairs counted - 1`` a round). When the rounds agree at least as well as
    their blocks predict, the blocks' noise sets the width and it is known from many pairs, so
    three rounds of 5 pairs are not judged with the t quantile of 2 degrees of freedom (9.9 at
    99%) that one spread estimated from three numbers would need. A spread between rounds larger
    than the blocks explain (a process that ran slow all round) always sets the width, with the
    rounds' degrees of freedom: the interval is never narrower than either spread says.
    """
    n = len(rounds)
    within_df = sum(rnd.within_df for rnd in rounds)
    if sd_within > sd_between and within_df > n - 1:
        return within_df
    return n - 1


def _check_inputs(
    rounds: Sequence[PairedRound],
    confidence: float,
    same_confidence: float | None,
    min_effect: float,
    noise_floor: float,
) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if same_confidence is not None and not 0.0 < same_confidence < 1.0:
        raise ValueError(f"same_confidence must be in (0, 1), got {same_confidence}")
    if not 0.0 < min_effect < 1.0:
        raise ValueError(f"min_effect must be in (0, 1), got {min_effect}")
    if not (math.isfinite(noise_floor) and noise_floor >= 0.0):
        raise ValueError(f"noise_floor must be >= 0, got {noise_floor}")
    if len(rounds) < 2:
        # One ratio says nothing about the noise between processes.
        raise ValueError(f"a paired estimate needs at least 2 rounds, got {len(rounds)}")
    for i, rnd in enumerate(rounds):
        _check_round(i, rnd)


def _check_round(i: int, rnd: PairedRound) -> None:
    for side, value in (("rev", rnd.rev), ("head", rnd.head)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"round {i}: {side} images/sec must be a positive number, got {value}")
    for side, blocks in (("rev", rnd.rev_blocks), ("head", rnd.head_blocks)):
        bad = [b for b in blocks if not (math.isfinite(b) and b > 0)]
        if bad:
            raise ValueError(f"round {i}: {side} block rates must be positive, got {bad[0]}")
    if not all(math.isfinite(x) and x > 0 for pair in rnd.pairs for x in pair):
        raise ValueError(f"round {i}: block-pair rates must be positive numbers")


def default_same_level(rounds: Sequence[PairedRound], pooled: RoundNoise | None) -> float:
    """The default level of a case's equivalence interval: :data:`SAME_CONFIDENCE` when all its
    rounds have block pairs and may be pooled (`roundeffect.poolable`) and the run's round
    effect ``pooled`` has at least :data:`POOLED_DF_FOR_SAME` degrees of freedom besides this
    case's own ``n - 1`` (which `roundeffect.round_noise` counted in it), else
    :data:`UNPOOLED_SAME_CONFIDENCE`."""
    if pooled is None or not poolable(rounds):
        return UNPOOLED_SAME_CONFIDENCE
    others = pooled.df - (len(rounds) - 1)
    return SAME_CONFIDENCE if others >= POOLED_DF_FOR_SAME else UNPOOLED_SAME_CONFIDENCE


def paired_estimate(
    rounds: Sequence[PairedRound],
    *,
    confidence: float = CONFIDENCE,
    min_effect: float = MIN_EFFECT,
    noise_floor: float = NOISE_FLOOR,
    same_confidence: float | None = None,
    pooled: RoundNoise | None = None,
) -> PairedEstimate:
    """Estimate HEAD/REV over ``rounds`` (at least two) and decide; see the module docstring.
    ``same_confidence`` (default: :func:`default_same_level`) above ``confidence`` is capped at it.
    ``pooled``: the run's round effect (`roundeffect.round_noise` over its cases), for the
    equivalence interval.

    :raises ValueError: fewer than two rounds, a rate that is not a positive number, or a
        confidence, minimum effect or floor out of range.
    """
    _check_inputs(rounds, confidence, same_confidence, min_effect, noise_floor)
    n = len(rounds)
    if same_confidence is None:  # after the check: a round's blocks divide by its rates
        same_confidence = default_same_level(rounds, pooled)

    logs = [math.log(rnd.ratio) for rnd in rounds]
    mean, sd_between = mean_sd(logs)
    sd_within = math.sqrt(math.fsum(rnd.within_noise**2 for rnd in rounds) / n)
    sd = max(sd_between, sd_within, noise_floor)
    df = _degrees_of_freedom(rounds, sd_between, sd_within)
    half = half_width(confidence, sd, n, n - 1)
    low, high = math.exp(mean - half), math.exp(mean + half)
    same_level = min(same_confidence, confidence)
    model = pooled_sd(rounds, pooled, (sd_between, sd_within), noise_floor)
    same_sd, df = model if model is not None else (sd, df)
    same_half = half_width(same_level, same_sd, n, df)
    same = (math.exp(mean - same_half), math.exp(mean + same_half))
    decision = decide(low, high, min_effect, same)
    suggested = (
        suggest_rounds(mean, sd, (n, df), (confidence, same_level), min_effect)
        if decision is Decision.UNKNOWN
        else None
    )
    return PairedEstimate(
        ratio=math.exp(mean),
        low=low,
        high=high,
        n_rounds=n,
        ratios=tuple(rnd.ratio for rnd in rounds),
        decision=decision,
        suggested_rounds=suggested,
        confidence=confidence,
        min_effect=min_effect,
        sd=sd,
        sd_between=sd_between,
        sd_within=sd_within,
        same_low=same[0],
        same_high=same[1],
        df=df,
        pooled=pooled if model is not None else None,
        same_level=same_level,
    )
