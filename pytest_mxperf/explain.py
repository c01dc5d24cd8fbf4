"""The message a user reads for a verdict: short at the top (case, change, threshold), the
evidence below (attempts, what changed). Written from a decided `Verdict`, never deciding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_mxperf import paired
from pytest_mxperf.markers import Expectation
from pytest_mxperf.paired import PairedEstimate
from pytest_mxperf.records import CaseResult, Outcome, Scaling, Verdict
from pytest_mxperf.resolution import BaselineRef
from pytest_mxperf.verdict import Policy, decide, decide_scaling, failed_expectation


def fmt_rate(rate: float | None) -> str:
    return "OOM" if rate is None else f"{rate:.1f} img/s"


def diff_stack(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between two software/environment records, as ``name: old -> new``."""
    lines = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a != b:
            lines.append(f"{name}: {'unset' if a is None else a} -> {'unset' if b is None else b}")
    return lines


def what_changed(result: CaseResult, ref: BaselineRef) -> list[str]:
    """Software, environment and thread differences between the baseline and this run."""
    base = ref.case
    changed = diff_stack(base.software, result.software) + diff_stack(
        base.environment, result.environment
    )
    if base.threads != result.threads:
        changed += diff_stack(base.threads, result.threads)
    return changed


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
    key, rate, out = str(result.key), result.images_per_sec, verdict.outcome
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
            tries = ", ".join(f"{a:.1f}" for a in result.attempts)
            lines.append(f"measured {len(result.attempts)} times (img/s: {tries}); judged the best")
        changed = what_changed(result, ref)
        lines.append(
            "changed since the baseline: " + ("; ".join(changed) if changed else "nothing recorded")
        )
        return "\n".join(lines)
    if out == Outcome.IMPROVED:
        return f"{head}: faster than the baseline; run with --mxperf-update to store it"
    return head


def judge(
    result: CaseResult,
    ref: BaselineRef | None,
    expectations: Sequence[Expectation],
    policy: Policy,
    elsewhere: Sequence[str] = (),
) -> Verdict:
    """Decide, then explain: the verdict with its message."""
    verdict = decide(result, ref, expectations, policy)
    return verdict.explained(explain(result, verdict, ref, expectations, policy, elsewhere))


def pair_summary(estimate: PairedEstimate, rev_label: str, confidence: float) -> str:
    """``HEAD vs REV: -8.1% (99% interval -10.2% .. -6.0%, 3 rounds)``."""
    return (
        f"HEAD vs {rev_label}: {estimate.ratio - 1:+.1%} ({confidence:.0%} interval "
        f"{estimate.low - 1:+.1%} .. {estimate.high - 1:+.1%}, {estimate.n_rounds} round(s))"
    )


def explain_paired(
    result: CaseResult,
    verdict: Verdict,
    estimate: PairedEstimate | None,
    rev_label: str,
    rounds_text: str,
    min_effect: float,
    failures: Sequence[str] = (),
) -> str:
    """The message of a paired verdict (``--mxperf-ab``)."""
    key = str(result.key)
    if estimate is None:
        if failures:
            return f"{key}: {rev_label}'s side could not measure it: " + "; ".join(failures)[:800]
        return f"{key}: not measured at {rev_label} (the case does not exist there)"
    head = f"{key}: {pair_summary(estimate, rev_label, paired.CONFIDENCE)}"
    lines = [head, f"img/s per round ({rev_label}/HEAD): {rounds_text}"]
    out = verdict.outcome
    if out == Outcome.REGRESSED:
        lines[0] += f": slower, and a drop of {min_effect:.0%} or more is not ruled out"
    elif out == Outcome.PASS and estimate.low > 1 - min_effect and estimate.high < 1:
        lines[0] += f": slower by {1 - estimate.ratio:.1%}, less than the minimum effect"
    elif out == Outcome.PASS:
        lines[0] += f": the same within the minimum effect ({min_effect:.0%})"
    elif out == Outcome.UNSTABLE:
        lines[0] += (
            f": too noisy to decide; about {estimate.suggested_rounds} rounds would "
            f"(--mxperf-max-rounds {estimate.suggested_rounds})"
        )
    elif out == Outcome.IMPROVED:
        lines[0] += ": faster"
    return "\n".join(lines)


def explain_arbitrated(
    stored_message: str,
    verdict: Verdict,
    estimate: PairedEstimate | None,
    rev_label: str,
    rounds_text: str,
    changed: Sequence[str],
    other_machine: bool,
    why_not: str | None = None,
    what: str = "img/s",
) -> str:
    """The message of a stored-baseline verdict after a paired run of the baseline commit
    (``what`` the pair compared: img/s, or a data-parallel case's scaling efficiency)."""
    where = " (the baseline was measured on another machine)" if other_machine else ""
    if estimate is None:
        return (
            f"{stored_message}\nnot confirmed by a paired run: {why_not or 'no pair measured'}"
            f"{where}"
        )
    pair = pair_summary(estimate, f"baseline commit {rev_label}", paired.CONFIDENCE)
    if what != "img/s":
        pair = f"{what} {pair}"
    rounds = f"{what} per round (baseline commit/HEAD): {rounds_text}"
    if verdict.outcome == Outcome.MACHINE:
        # Reached with changes only when the baseline side ran in the baseline's environment.
        what = "the code is not slower"
        if changed:
            what = (
                "the code and software are not slower (the baseline side ran in the baseline "
                f"commit's own environment; changed since the baseline: {'; '.join(changed)})"
            )
        return (
            f"{stored_message.splitlines()[0]}\nbut on this machine {pair}: {what}; the stored "
            f"figure does not hold here{where}. Store a baseline for this machine with "
            f"--mxperf-update (or name it with --mxperf-machine)\n{rounds}"
        )
    if verdict.outcome == Outcome.UNSTABLE:
        return f"{stored_message}\na paired run could not confirm it: {pair}\n{rounds}"
    if verdict.outcome in (Outcome.PASS, Outcome.IMPROVED):
        return f"{stored_message}\na paired run on this machine found no loss: {pair}\n{rounds}"
    if estimate.decision == paired.Decision.UNKNOWN:
        return (
            f"{stored_message}\na paired run without the baseline's software could not decide "
            f"({pair}), and what changed since the baseline may explain the drop: "
            f"{'; '.join(changed)} (see --mxperf-env-command to pair across environments)"
            f"{where}\n{rounds}"
        )
    if estimate.decision != paired.Decision.REGRESSED:
        return (
            f"{stored_message}\na paired run in today's environment cleared the code ({pair}), "
            f"so the drop comes from what changed since the baseline: {'; '.join(changed)} "
            f"(see --mxperf-env-command to pair across environments){where}\n{rounds}"
        )
    return f"{stored_message}\nconfirmed by a paired run on this machine: {pair}{where}\n{rounds}"


#: A rise of the communication share by at least this much (absolute) explains a scaling drop.
COMM_GREW = 0.05


def explain_paired_scaling(
    kvstore: str,
    estimate: PairedEstimate,
    regressed: bool,
    rev_label: str,
    rounds_text: str,
    shares: tuple[float, float],
    min_effect: float,
) -> str:
    """The scaling part of a paired data-parallel verdict: the efficiency HEAD vs REV over the
    rounds, and the kvstore share of a step on each side (``shares``: REV's, HEAD's medians)."""
    head = f"scaling efficiency {pair_summary(estimate, rev_label, paired.CONFIDENCE)}"
    if regressed:
        head += f": lower, and a drop of {min_effect:.0%} or more is not ruled out"
    rev_share, head_share = shares
    share = f"kvstore ({kvstore}) share of a step ({rev_label} -> HEAD): {rev_share:.0%} -> "
    share += f"{head_share:.0%}"
    if head_share - rev_share >= COMM_GREW:
        share += (
            ": scaling dropped because communication grew" if regressed else ": communication grew"
        )
    elif regressed:
        share += ": communication did not grow (a faster single device also lowers the efficiency)"
    return "\n".join([head, f"efficiency per round ({rev_label}/HEAD): {rounds_text}", share])


def scaling_summary(s: Scaling) -> str:
    """``dist_sync x2: 310.2 img/s aggregate (per worker 155.3, 154.9), img/s(1) 180.4,
    efficiency 86.0%, kvstore share 12%``."""
    workers = ", ".join(f"{r:.1f}" for r in s.per_worker_images_per_sec)
    aggregate = s.efficiency * s.world_size * s.single_images_per_sec
    return (
        f"{s.kvstore} x{s.world_size}: {aggregate:.1f} img/s aggregate (per worker {workers}), "
        f"img/s(1) {s.single_images_per_sec:.1f}, efficiency {s.efficiency:.1%}, "
        f"kvstore share {s.comm_share:.0%}"
    )


def where_time_went(s: Scaling, ref: BaselineRef | None) -> str:
    """The communication (kvstore) share of a step now and in the baseline, and what it says."""
    base = None if ref is None else ref.case.comm_share
    if base is None:
        return f"kvstore ({s.kvstore}) share of a step: {s.comm_share:.0%}"
    text = f"kvstore ({s.kvstore}) share of a step: {base:.0%} -> {s.comm_share:.0%}"
    assert ref is not None
    if s.comm_share - base >= COMM_GREW:
        eff = ref.case.efficiency
        if eff is not None and s.efficiency < eff:
            return (
                f"{text}: scaling dropped because communication grew (efficiency {eff:.1%} -> "
                f"{s.efficiency:.1%})"
            )
        return f"{text}: communication grew"
    single = ref.case.record.get("single_images_per_sec")
    was = f"{single:.1f} -> " if isinstance(single, (int, float)) else ""
    return (
        f"{text}: communication did not grow; img/s(1) {was}{s.single_images_per_sec:.1f} "
        "(a faster single device also lowers the efficiency)"
    )


def explain_scaling(result: CaseResult, verdict: Verdict, ref: BaselineRef | None) -> str:
    """The message of a data-parallel case whose verdict ``scaling`` decided (below the
    marker's efficiency floor, or a drop of the stored efficiency); else its one-line
    scaling summary, added to the aggregate's message by the caller."""
    s = result.scaling
    assert s is not None
    key = str(result.key)
    if not verdict.scaling:
        lines = [f"{key}: {scaling_summary(s)}"]
        if verdict.outcome == Outcome.REGRESSED and ref is not None:
            # The aggregate dropped: say whether the exchange took the time.
            lines.append(where_time_went(s, ref))
        return "\n".join(lines)
    if verdict.outcome == Outcome.BELOW:
        assert verdict.efficiency_floor is not None
        return "\n".join(
            [
                f"{key}: scaling efficiency {s.efficiency:.1%} at world size {s.world_size} is "
                f"below the marker's floor {verdict.efficiency_floor:.1%} on hardware "
                f"{result.hardware}",
                scaling_summary(s),
                where_time_went(s, ref),
            ]
        )
    assert ref is not None and verdict.baseline_efficiency is not None
    assert verdict.efficiency_change is not None and verdict.efficiency_threshold is not None
    lines = [
        f"{key}: scaling efficiency {s.efficiency:.1%} vs baseline "
        f"{verdict.baseline_efficiency:.1%} ({verdict.efficiency_change:+.1%}), tolerance "
        f"{verdict.efficiency_threshold:.1%}; {where(ref, result.hardware)}",
        where_time_went(s, ref),
        scaling_summary(s),
    ]
    if len(result.attempts) > 1:
        tries = ", ".join(f"{a:.1f}" for a in result.attempts)
        lines.append(f"measured {len(result.attempts)} times (aggregate img/s: {tries})")
    changed = what_changed(result, ref)
    lines.append(
        "changed since the baseline: " + ("; ".join(changed) if changed else "nothing recorded")
    )
    return "\n".join(lines)


def judge_scaling(
    result: CaseResult,
    ref: BaselineRef | None,
    expectations: Sequence[Expectation],
    floor: float | None,
    policy: Policy,
    elsewhere: Sequence[str] = (),
) -> Verdict:
    """`judge` for a data-parallel case: the aggregate's verdict, then the scaling gates, then
    the message (the scaling one leads when the scaling decided)."""
    base = decide(result, ref, expectations, policy)
    aggregate = explain(result, base, ref, expectations, policy, elsewhere)
    verdict = decide_scaling(base, result, ref, floor, policy)
    if result.scaling is None or verdict.outcome in (Outcome.NAN, Outcome.ERROR):
        return verdict.explained(aggregate)
    if verdict.scaling:
        # What changed since the baseline is said once, in the scaling part.
        kept = [x for x in aggregate.splitlines() if not x.startswith("changed since the")]
        lead = explain_scaling(result, verdict, ref)
        return verdict.explained(lead + "\naggregate: " + "\n".join(kept))
    return verdict.explained(aggregate + "\n" + explain_scaling(result, verdict, ref))
