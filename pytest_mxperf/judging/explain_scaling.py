"""The messages of a data-parallel case's scaling: its efficiency against the baseline, where
the time went (compute or exchange), the paired efficiency of ``--mxperf-ab`` (written from a
decided `Verdict`, like `pytest_mxperf.judging.explain`)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.judging import pairstats
from pytest_mxperf.judging.changes import changed_line
from pytest_mxperf.judging.decisions import Policy, decide, decide_scaling
from pytest_mxperf.judging.explain import explain, pair_summary, where
from pytest_mxperf.judging.pairstats import PairedEstimate
from pytest_mxperf.measuring.records import CaseResult, Outcome, Scaling, Verdict

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
    head_name: str = "HEAD",
) -> str:
    """The scaling part of a paired data-parallel verdict: the efficiency HEAD vs REV over the
    rounds, and the kvstore share of a step on each side (``shares``: REV's, HEAD's medians)."""
    head = (
        f"scaling efficiency {pair_summary(estimate, rev_label, pairstats.CONFIDENCE, head_name)}"
    )
    if regressed:
        head += f": lower, and a drop of {min_effect:.0%} or more is not ruled out"
    rev_share, head_share = shares
    share = f"kvstore ({kvstore}) share of a step ({rev_label} -> {head_name}): {rev_share:.0%} -> "
    share += f"{head_share:.0%}"
    if head_share - rev_share >= COMM_GREW:
        share += (
            ": scaling dropped because communication grew" if regressed else ": communication grew"
        )
    elif regressed:
        share += ": communication did not grow (a faster single device also lowers the efficiency)"
    rounds = f"efficiency per round ({rev_label}/{head_name}): {rounds_text}"
    return "\n".join([head, rounds, share])


def scaling_summary(s: Scaling) -> str:
    """``dist_sync x2: 310.2 img/s aggregate (per worker 155.3, 154.9), img/s(1) 180.4,
    efficiency 86.0%, kvstore share 12%`` and, for several worker processes, where their
    step went (`step_split`)."""
    workers = ", ".join(f"{r:.1f}" for r in s.per_worker_images_per_sec)
    aggregate = s.efficiency * s.world_size * s.single_images_per_sec
    strong = ""
    if s.kind == "strong":  # img/s(1) is one worker at the whole total batch
        strong = f" strong scaling (total batch {s.total_batch}, {s.batch_per_device} per device)"
    speedup = f"speed-up {s.efficiency * s.world_size:.2f}, " if strong else ""
    text = (
        f"{s.kvstore} x{s.world_size}{strong}: {aggregate:.1f} img/s aggregate (per worker "
        f"{workers}), img/s(1) {s.single_images_per_sec:.1f}, {speedup}efficiency "
        f"{s.efficiency:.1%}, kvstore share {s.comm_share:.0%}"
    )
    split = step_split(s)
    return text if split is None else f"{text}; {split}"


def step_split(s: Scaling) -> str | None:
    """``a step of a worker: compute 60%, kvstore push/pull 30%, waiting for the slowest
    worker 10%`` for worker processes (dist kvstores), else None."""
    if not s.kvstore.startswith("dist") or s.world_size < 2:
        return None
    wait = min(s.wait_share, s.comm_share)
    return (
        f"a step of a worker: compute {1 - s.comm_share:.0%}, kvstore push/pull "
        f"{s.comm_share - wait:.0%}, waiting for the slowest worker {wait:.0%}"
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
    key = result.key
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
    lines.append(changed_line(result, ref))
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
