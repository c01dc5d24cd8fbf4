"""The message a user reads for a verdict: short at the top (case, change, threshold), the
evidence below (attempts, what changed). Written from a decided `Verdict`, never deciding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.judging import pairstats
from pytest_mxperf.judging.changes import changed_line
from pytest_mxperf.judging.decisions import Policy, decide, failed_expectation
from pytest_mxperf.judging.pairstats import PairedEstimate
from pytest_mxperf.measuring.records import CaseResult, Outcome, Verdict
from pytest_mxperf.measuring.verdicts import Judged, message_lines

#: Said of a baseline all of whose runs other machines stored.
ELSEWHERE = " (the baseline was measured on another machine)"
#: What to do when the stored figure does not hold on this machine.
STORE_HERE = (
    "Store a baseline for this machine with --mxperf-update (or name it with --mxperf-machine)"
)


def fmt_rate(rate: float | None) -> str:
    return "OOM" if rate is None else f"{rate:.1f} img/s"


def where(ref: BaselineRef, hardware: str) -> str:
    """``baseline commit <sha> (<date>, N commit(s) before HEAD) on <hardware>``."""
    commit = ref.commit
    between = (
        f"{ref.distance} commit(s) before HEAD"
        if ref.distance is not None
        else f"chosen as {ref.how or 'newest by date'}"
    )
    return (
        f"baseline commit {str(commit.get('sha', '?'))[:10]} "
        f"({commit.get('date', 'unknown date')}, {between}) on {hardware}"
    )


def explain(
    result: CaseResult,
    verdict: Verdict,
    ref: BaselineRef | None,
    expectations: Sequence[Expectation],
    policy: Policy,
    elsewhere: Sequence[str] = (),
) -> str:
    """The message of ``verdict`` for ``result``."""
    key, rate, out = result.key, result.images_per_sec, verdict.outcome
    if out in (Outcome.NAN, Outcome.ERROR):
        return f"{key}: {result.error}"
    if rate is None:  # out of memory
        if out == Outcome.REGRESSED and ref is not None:
            return (
                f"{key}: out of memory at batch size {result.batch_size}, the baseline measured "
                f"{fmt_rate(ref.case.images_per_sec)}; {where(ref, result.hardware)}"
            )
        return f"{key}: out of memory at batch size {result.batch_size}"
    if out == Outcome.BELOW:
        exp = failed_expectation(rate, expectations, policy)
        assert exp is not None
        tol = policy.floor_tolerance if exp.tolerance is None else exp.tolerance
        return (
            f"{key}: measured {fmt_rate(rate)} is below the expected "
            f"{fmt_rate(exp.images_per_sec)} (tolerance {tol:.0%}, floor "
            f"{fmt_rate(exp.floor(policy.floor_tolerance))}) on hardware {result.hardware} "
            f"(marker hardware={exp.hardware!r})"
        )
    if ref is None:
        msg = f"{key}: no baseline for hardware {result.hardware}"
        if elsewhere:
            msg += f" (stored for: {', '.join(sorted(elsewhere))}; see --mxperf-machine)"
        return msg
    if ref.case.images_per_sec is None:
        return (
            f"{key}: runs now ({fmt_rate(rate)}); the baseline ran out of memory; "
            f"{where(ref, result.hardware)}"
        )
    assert verdict.change is not None and verdict.threshold is not None
    head = (
        f"{key}: {fmt_rate(rate)} vs baseline {fmt_rate(ref.case.images_per_sec)} "
        f"({verdict.change:+.1%}), tolerance {verdict.threshold:.1%} "
        f"(noise {verdict.noise or 0:.1%})"
    )
    if out == Outcome.UNSTABLE:
        return (
            f"{head}: too noisy to judge (block spread {result.rel_iqr:.1%}); "
            f"{where(ref, result.hardware)}"
        )
    if out == Outcome.REGRESSED:
        lines = [f"{head}; {where(ref, result.hardware)}"]
        if len(result.attempts) > 1:
            lines.append(attempts_line(result.attempts, result.images_per_sec))
        lines.append(changed_line(result, ref))
        return "\n".join(lines)
    if out == Outcome.IMPROVED:
        return f"{head}: faster than the baseline; run with --mxperf-update to store it"
    return head


def attempts_line(attempts: list[float], judged: float | None) -> str:
    """``measured 3 times (img/s: 95.0, 101.2, 99.0); judged the best``, or ``...; judged
    99.0`` where the figure judged was not the fastest: a faster attempt's blocks spread too
    far to judge (`runner.better_attempt`), or a paired run's rounds, whose middle is taken."""
    tries = ", ".join(f"{a:.1f}" for a in attempts)
    head = f"measured {len(attempts)} times (img/s: {tries}); judged "
    if judged is None or judged >= max(attempts):
        return head + "the best"
    return head + f"{judged:.1f}"


def judge(
    result: CaseResult,
    ref: BaselineRef | None,
    expectations: Sequence[Expectation],
    policy: Policy,
    elsewhere: Sequence[str] = (),
    decided: Verdict | None = None,
) -> Judged:
    """Decide (unless ``decided`` is the decision already made), then explain: the decision
    and the lines of its message."""
    verdict = decide(result, ref, expectations, policy) if decided is None else decided
    text = explain(result, verdict, ref, expectations, policy, elsewhere)
    return Judged(verdict, message_lines(text))


def clip_lines(text: str, limit: int = 1500) -> str:
    """``text``, or its first line and as many of its last whole lines as fit in ``limit``
    characters (the end of a traceback says what went wrong; never cut mid-line)."""
    if len(text) <= limit:
        return text
    first, *rest = text.splitlines()
    kept: list[str] = []
    size = len(first)
    for line in reversed(rest):
        if size + len(line) + 1 > limit:
            break
        kept.append(line)
        size += len(line) + 1
    skipped = len(rest) - len(kept)
    return "\n".join([first, f"... ({skipped} line(s) left out)", *reversed(kept)])


def pair_summary(
    estimate: PairedEstimate, rev_label: str, confidence: float, head_name: str = "HEAD"
) -> str:
    """``HEAD vs REV: -8.1% (99% interval -10.2% .. -6.0%, 3 rounds)``; a pair decided "the
    same" also gives the equivalence interval that decided it, and an undecided one the
    equivalence interval it did not get within +-min effect (two or three rounds in, the 99%
    interval alone can read -97% .. +4059%). ``head_name``: what HEAD's side measured ("the
    working tree" when it has uncommitted changes)."""
    shown = (pairstats.Decision.SAME, pairstats.Decision.NOT_SLOWER, pairstats.Decision.UNKNOWN)
    same = same_interval(estimate) if estimate.decision in shown else ""
    text = f"{head_name} vs {rev_label}: {_with_interval(estimate, confidence)}{same})"
    if estimate.first is None:
        return text
    return (
        f"{text}, measured again on fresh processes after a first paired run found "
        f"{_with_interval(estimate.first, confidence)})"
    )


def _with_interval(estimate: PairedEstimate, confidence: float) -> str:
    """``-8.1% (99% interval -10.2% .. -6.0%, 3 round(s)``, its parenthesis left open."""
    return (
        f"{estimate.ratio - 1:+.1%} ({confidence:.0%} interval {estimate.low - 1:+.1%} .. "
        f"{estimate.high - 1:+.1%}, {estimate.n_rounds} round(s)"
    )


def same_interval(estimate: PairedEstimate) -> str:
    """``; 95% interval -2.0% .. +1.1%``: the narrower equivalence interval, or nothing when it
    is not narrower."""
    if estimate.same_high >= estimate.high:
        return ""
    level = estimate.same_level
    return f"; {level:.0%} interval {estimate.same_low - 1:+.1%} .. {estimate.same_high - 1:+.1%}"


def inconclusive_text(estimate: PairedEstimate, budget_spent: bool) -> str:
    """``: inconclusive, no slower on average; about 14 rounds would decide (...)``: what an
    undecided pair lacks. Extra rounds go to cases they can decide within --mxperf-max-rounds,
    so an undecided case needed more than that, or the run's budget ran out first."""
    n = estimate.suggested_rounds
    # "no slower on average", not "not slower": that is a decision (a pass) of its own.
    text = ": inconclusive" + (", no slower on average" if estimate.ratio >= 1 else "")
    text += f"; about {n} rounds would decide (--mxperf-max-rounds {n})"
    if budget_spent:
        text += "; the run's --mxperf-pair-budget was spent before its rounds"
    return text


def explain_paired(
    result: CaseResult,
    verdict: Verdict,
    estimate: PairedEstimate | None,
    rev_label: str,
    rounds_text: str,
    min_effect: float,
    failures: Sequence[str] = (),
    head_name: str = "HEAD",
    budget_spent: bool = False,
) -> str:
    """The message of a paired verdict (``--mxperf-ab``); ``budget_spent``: the run's
    ``--mxperf-pair-budget`` ended the rounds before an undecided case had its own."""
    key = result.key
    if estimate is None:
        if failures:
            text = "\n".join(clip_lines(f) for f in failures)
            return f"{key}: {rev_label}'s side could not measure it: {text}"
        return f"{key}: not measured at {rev_label} (the case does not exist there)"
    head = f"{key}: {pair_summary(estimate, rev_label, pairstats.CONFIDENCE, head_name)}"
    lines = [head, f"img/s per round ({rev_label}/{head_name}): {rounds_text}"]
    out = verdict.outcome
    if out == Outcome.REGRESSED:
        lines[0] += f": slower, and a drop of {min_effect:.0%} or more is not ruled out"
    elif out == Outcome.PASS and estimate.same_high < 1:
        lines[0] += f": {slower_by(estimate)}"
    elif out == Outcome.PASS and estimate.decision is pairstats.Decision.NOT_SLOWER:
        lines[0] += f": {not_slower(estimate)}"
    elif out == Outcome.PASS:
        lines[0] += f": the same within the minimum effect ({min_effect:.0%})"
    elif out == Outcome.INCONCLUSIVE:
        lines[0] += inconclusive_text(estimate, budget_spent)
    elif out == Outcome.IMPROVED:
        lines[0] += ": faster"
    return "\n".join(lines)


def explain_arbitrated(
    stored: Verdict,
    verdict: Verdict,
    estimate: PairedEstimate | None,
    rev_label: str,
    rounds_text: str,
    changed: Sequence[str],
    other_machine: bool,
    why_not: str | None = None,
    what: str = "img/s",
    budget_spent: bool = False,
) -> Verdict:
    """``verdict``, decided from the ``stored`` one and a paired run of the baseline commit,
    with its message: the stored message's lines (only its lead when the pair cleared the
    code), then the pair's evidence (``what`` the pair compared: img/s, or a data-parallel
    case's scaling efficiency); an inconclusive pair of img/s says, as in ``--mxperf-ab`` mode,
    whether its estimate is not slower and about how many rounds would decide
    (``budget_spent``: the run's ``--mxperf-pair-budget`` ended its rounds first)."""
    kept = replace(verdict, lines=stored.lines)
    where = ELSEWHERE if other_machine else ""
    if estimate is None:
        return kept.adding(f"not confirmed by a paired run: {why_not or 'no pair measured'}{where}")
    pair = pair_summary(estimate, f"baseline commit {rev_label}", pairstats.CONFIDENCE)
    if what != "img/s":
        pair = f"{what} {pair}"
    rounds = f"{what} per round (baseline commit/HEAD): {rounds_text}"
    if verdict.outcome == Outcome.MACHINE:
        lead = replace(verdict, lines=stored.lines[:1])
        found = _machine_finding(stored, estimate, changed)
        return lead.adding(
            f"but on this machine {pair}: {found}; the stored figure does not hold here{where}. "
            f"{STORE_HERE}",
            rounds,
        )
    if verdict.outcome == Outcome.INCONCLUSIVE:
        # The rounds a run adds follow the cases' img/s: a scaling efficiency left undecided
        # may not have had the rounds its projection names, so none is named for it.
        lacks = inconclusive_text(estimate, budget_spent) if what == "img/s" else ""
        return kept.adding(f"a paired run could not confirm it: {pair}{lacks}", rounds)
    if verdict.outcome in (Outcome.PASS, Outcome.IMPROVED):
        return kept.adding(f"a paired run on this machine found no loss: {pair}", rounds)
    if estimate.decision == pairstats.Decision.UNKNOWN and not changed:
        # An unstable case (its own blocks too spread to judge) the pair could not decide.
        return kept.adding(f"a paired run could not decide either: {pair}{where}", rounds)
    if estimate.decision == pairstats.Decision.UNKNOWN:
        return kept.adding(
            f"a paired run without the baseline's software could not decide ({pair}), and what "
            f"changed since the baseline may explain the drop: {'; '.join(changed)} (see "
            f"--mxperf-env-command to pair across environments){where}",
            rounds,
        )
    if estimate.decision != pairstats.Decision.REGRESSED:
        return kept.adding(
            f"a paired run in today's environment cleared the code ({pair}), so the drop comes "
            f"from what changed since the baseline: {'; '.join(changed)} (see "
            f"--mxperf-env-command to pair across environments){where}",
            rounds,
        )
    return kept.adding(f"confirmed by a paired run on this machine: {pair}{where}", rounds)


def _machine_finding(stored: Verdict, estimate: PairedEstimate, changed: Sequence[str]) -> str:
    """What a pair that found the stored figure wrong for this machine says of the code."""
    if changed:
        # Reached with changes only when the baseline side ran in the baseline's environment.
        return (
            "the code and software are not slower (the baseline side ran in the baseline "
            f"commit's own environment; changed since the baseline: {'; '.join(changed)})"
        )
    if estimate.same_high < 1:
        return f"the code is {slower_by(estimate)}"
    if estimate.decision is pairstats.Decision.UNKNOWN and stored.threshold is not None:
        # Cleared at the stored threshold (`decisions.decide_arbitration_pair`).
        return f"the code is not slower by {stored.threshold:.1%} or more, the case's own threshold"
    return "the code is not slower"


def explain_same_code(
    stored: Verdict,
    verdict: Verdict,
    rev_label: str,
    changed: Sequence[str],
    other_machine: bool,
) -> Verdict:
    """``verdict``, decided from the ``stored`` one for code that is the baseline commit's (only
    the baseline files differ, so no paired run was needed to judge the code), with its
    message: the stored lines (only the lead when the machine is to blame), then why."""
    where = ELSEWHERE if other_machine else ""
    same = f"the code is the baseline commit {rev_label}'s (only baseline files differ)"
    if verdict.outcome == Outcome.MACHINE:
        return replace(verdict, lines=stored.lines[:1]).adding(
            f"but {same}: the stored figure does not hold on this machine{where}. {STORE_HERE}"
        )
    kept = replace(verdict, lines=stored.lines)
    if verdict.outcome == Outcome.REGRESSED and changed:
        return kept.adding(
            f"{same}, so the drop comes from what changed since the baseline: "
            f"{'; '.join(changed)}{where}"
        )
    return kept.adding(f"{same}: no paired run needed{where}")


def not_slower(estimate: PairedEstimate) -> str:
    """A pair whose equivalence interval rules out a loss of the minimum effect but not a gain
    of it (a pass: the gate asks whether the code got slower)."""
    return (
        f"not slower (a loss of {estimate.min_effect:.0%} or more is ruled out; it may be "
        f"faster, by up to {estimate.same_high - 1:.1%})"
    )


def slower_by(estimate: PairedEstimate) -> str:
    """A certain loss the equivalence interval keeps inside the minimum effect (a pass)."""
    return (
        f"slower by about {1 - estimate.ratio:.1%}, less than the minimum effect "
        f"({estimate.min_effect:.0%})"
    )
