"""Which undecided cases of a paired run more rounds could decide, closest to deciding first
(`worth_more_rounds`), and the rounds that would clear a case at its own stored threshold."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Callable, Optional

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging import pairplan, pairstats
from pytest_mxperf.paired.pairdata import PairedData

#: Rounds before an undecided case that is not slower may be given up as inconclusive.
FUTILITY_FROM = 3


#: A case's loss that its arbitration must rule out (a stored threshold wider than the minimum
#: effect, `decisions.stored_threshold`), or None where only the minimum effect counts.
Clears = Callable[[CaseKey], Optional[float]]


def worth_more_rounds(
    data: PairedData,
    keys: Sequence[CaseKey],
    min_effect: float,
    strict: bool,
    max_rounds: int,
    clears: Clears | None = None,
) -> list[CaseKey]:
    """Undecided keys more rounds could decide, closest to deciding first: those whose
    projected rounds to a decision (`PairedEstimate.suggested_rounds`, from the estimate and
    spread so far) fit within ``max_rounds`` in all (``data.rounds`` counts those run, a failed
    side's too); those HEAD measured slower so far that rounds up to ``max_rounds`` could still
    fail (`could_still_regress`); with ``strict`` every undecided one (an undecided case
    fails there); and any undecided case with fewer than :data:`FUTILITY_FROM` rounds (the
    spread of two rounds is one figure from two numbers, too unsure to call a case hopeless).
    A case whose rounds disagree too much to decide in time, and that could not fail, ends
    inconclusive without them.

    ``clears`` (a joint pair or an arbitration: stored thresholds are known) adds the cases
    whose own threshold is wider than ``min_effect`` and that rounds up to ``max_rounds`` are
    projected to clear at it (`clear_rounds`): their arbitration passes once a loss of that size
    is ruled out, sooner than one of ``min_effect``. A case cleared so already passes whatever
    more rounds say about ``min_effect`` except a loss: it keeps rounds only while measured
    slower and able to fail (fewer than :data:`FUTILITY_FROM` rounds, or `could_still_regress`
    at its estimate as measured, not moved towards a loss), not to be found the same within
    ``min_effect``: its verdict is taken, and rounds go where a decision is near.

    A case with `PairedData.earlier` rounds (a joint pair measuring again a case its own pair
    left inconclusive) is kept while undecided, up to ``max_rounds`` with those rounds counted:
    it was measured again to be decided, and its own pair's futility stop is why it was not."""
    if len(data.rounds) >= max_rounds:
        return []
    out: list[tuple[int, CaseKey]] = []
    for key, est in data.estimates(keys, min_effect).items():
        left = max_rounds - len(data.rounds) - len(data.earlier.get(key, ()))
        if est is None or est.decision != pairstats.Decision.UNKNOWN or left < 1:
            continue
        need = est.suggested_rounds or pairplan.MAX_SUGGESTED_ROUNDS
        effect = None if clears is None else clears(key)
        cleared = effect is not None and est.rules_out_wider(effect)  # its arbitration passes
        if cleared:
            # Its verdict is a pass whatever more rounds say, unless they find a loss of the
            # minimum effect: only a case measured slower that could still fail gets them.
            if est.ratio < 1.0 and (
                est.n_rounds < FUTILITY_FROM or could_still_regress(est, left, shifted=False)
            ):
                out.append((need, key))
            continue
        again = key in data.earlier
        if again or worth_another_round(est, left, max_rounds, strict):
            out.append((need, key))
            continue
        to_clear = None if effect is None else clear_rounds(data, key, effect, est)
        if to_clear is not None and to_clear <= max_rounds:
            out.append((to_clear, key))
    return [key for _, key in sorted(out, key=lambda t: (t[0], str(t[1])))]


def clear_rounds(
    data: PairedData, key: CaseKey, effect: float, est: pairstats.PairedEstimate
) -> int | None:
    """Rounds in all projected to rule out a loss of ``effect`` for ``key`` (``est``: its
    undecided estimate at the minimum effect); None when ``effect`` is no wider than the
    minimum effect or the loss is ruled out already (the arbitration clears it now)."""
    if effect <= est.min_effect or est.rules_out_wider(effect):
        return None
    wide = data.estimate(key, effect)
    if wide is None or wide.decision != pairstats.Decision.UNKNOWN:
        return None
    return wide.suggested_rounds or pairplan.MAX_SUGGESTED_ROUNDS


def worth_another_round(
    est: pairstats.PairedEstimate, left: int, max_rounds: int, strict: bool
) -> bool:
    """`worth_more_rounds`' rule for one undecided estimate, ``left`` rounds still allowed."""
    need = est.suggested_rounds or pairplan.MAX_SUGGESTED_ROUNDS
    near = need <= max_rounds or est.n_rounds < FUTILITY_FROM
    return strict or near or (est.ratio < 1.0 and could_still_regress(est, left))


def could_still_regress(
    estimate: pairstats.PairedEstimate, more_rounds: int, shifted: bool = True
) -> bool:
    """Could up to ``more_rounds`` more rounds still decide REGRESSED for an UNKNOWN estimate?

    Futility, for :func:`worth_more_rounds`: the interval at ``m``
    rounds is projected with the per-round SD measured so far and, with ``shifted``, the
    estimate moved one standard error further down (in favour of a regression, so that a real
    loss that was only unlucky in its first rounds keeps its rounds; without it, the estimate
    as measured: a case whose verdict is taken already). False when no ``m`` up to
    ``n_rounds + more_rounds`` would put the whole interval below 1 with its lower end at
    ``1 - min_effect`` or lower: then more rounds would cost time and could not fail the case.
    A batch-1 case whose rounds swing by 7% around -1% is such a case; a 5% loss at 1-2% per
    round is not.
    """
    n = estimate.n_rounds
    sd = estimate.sd
    mean = math.log(estimate.ratio) - (sd / math.sqrt(n) if shifted else 0.0)
    floor = math.log(1.0 - estimate.min_effect)
    for m in range(n + 1, n + more_rounds + 1):
        half = pairplan.half_width(
            estimate.confidence, sd, m, pairplan.projected_df(estimate.df, n, m)
        )
        if mean + half < 0.0 and mean - half <= floor:
            return True
    return False
