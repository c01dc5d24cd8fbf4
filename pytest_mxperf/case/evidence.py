"""A measured case's diagnosis in the fixture: the sides' operator profiles taken onto it,
peak memory and start-up judged against the baseline (stored, or the paired run's other side),
and a regression's evidence (operators, memory, start-up, what changed, commits since)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pytest_mxperf.baselines.kept_runs import nearest
from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.judging import evidence_lines
from pytest_mxperf.judging.changes import changes_between, what_changed
from pytest_mxperf.judging.decisions import Policy
from pytest_mxperf.measuring import diagnosis
from pytest_mxperf.measuring.memory import MemoryRecord
from pytest_mxperf.measuring.records import CaseResult, Outcome, Verdict
from pytest_mxperf.measuring.stats import median
from pytest_mxperf.paired import pairdata
from pytest_mxperf.run.session import MxperfSession


@dataclass
class CaseContext:
    """What the paired and evidence steps need of the test measuring a case: its session, node
    id and file, the fixture's policy at tolerance 0, the marker's memory limit, and the
    warnings to say once the case is kept (appended to here)."""

    session: MxperfSession
    nodeid: str
    path: str
    policy: Policy
    max_memory_mb: float | None = None
    pending_warnings: list[str] = field(default_factory=list)


def take_profiles(
    result: CaseResult, data: pairdata.PairedData, key: str
) -> tuple[CaseResult, str | None]:
    """``result`` with the sides' profiles of ``key`` (HEAD's side replaces one taken in this
    process: both sides then profiled alike), and why REV's profile is missing."""
    rounds = data.rounds + data.profile_rounds
    sides = {
        side: [r[side].cases[key] for r in rounds if key in r[side].cases]
        for side in (pairdata.REV, pairdata.HEAD)
    }
    head = next((c for c in sides[pairdata.HEAD] if c.profile is not None), None)
    if head is not None:
        result = replace(result, profile=head.profile, profile_error=None)
    elif result.profile is None:
        why_not = (
            next((c.profile_error for c in sides[pairdata.HEAD] if c.profile_error), None)
            or result.profile_error
            or "HEAD's side did not profile it"
        )
        result = replace(result, profile_error=why_not)
    traced = next((c for c in sides[pairdata.HEAD] if c.profile_trace), None)
    if traced is not None and result.profile_trace is None:
        result = replace(
            result, profile_trace=traced.profile_trace, profile_table=traced.profile_table
        )
    rev = next((c for c in sides[pairdata.REV] if c.profile is not None), None)
    if rev is not None:
        return replace(result, baseline_profile=rev.profile), None
    errors = [c.profile_error for c in sides[pairdata.REV] if c.profile_error]
    failures = data.side_failures(pairdata.REV)
    unprofiled = "the paired run profiles only the cases it finds slower"
    return result, (errors or failures or [unprofiled])[0]


def data_parallel(result: CaseResult) -> bool:
    """Whether ``result`` is a data-parallel case (`case.dataparallel`): its ranks run in their
    own processes (or one process drives every device) under the launcher, so it has no
    operator profile and no memory record, and its start-up figures are one rank's (the
    noisiest, which differs between runs) including the kvstore's set-up. Only a regression's
    "what changed" and commits apply to it; the other steps here skip it."""
    return result.key.world_size is not None


def finish_stored(
    ctx: CaseContext, result: CaseResult, ref: BaselineRef | None, why_no_base: str | None
) -> CaseResult:
    """``result`` with memory and start-up judged against the stored baseline, and a
    regression's evidence."""
    v = result.verdict
    if v is None:
        return result
    dp = data_parallel(result)  # no memory or start-up of its own: see there
    now_mb = None if result.memory is None else result.memory.peak_mb
    base_mb = None if ref is None or dp else ref.case.memory_reference(now_mb)
    if ref is not None and not dp:
        case = ref.case
        v = diagnosis.judge_startup(
            v, result.measurement, case.first_step_seconds, case.warmup_seconds
        )
    sha = None if ref is None else ref.commit.get("sha")
    changed = [] if ref is None else what_changed(result, ref)
    line = evidence_lines.CHANGED_PREFIX + " " + ("; ".join(changed) or "nothing recorded")
    return _finish(ctx, result, v, base_mb, why_no_base or "not profiled", [line], sha and str(sha))


def paired_memory(
    revs: list[CaseResult], heads: list[CaseResult]
) -> tuple[MemoryRecord | None, float | None]:
    """HEAD's peak memory over the rounds (its median round's record) and the figure it is
    judged against: the nearest of REV's rounds, i.e. REV's highest when HEAD is above them
    all, its lowest when below, HEAD's own figure in between.

    A case's peak moves between processes running the same code (the engine frees arrays
    asynchronously, so how many are alive at once varies): about 10% on this suite's models
    even with the allocator's free pages released first. HEAD's median must therefore clear
    every round of REV by the memory tolerance before the pair says memory grew (or shrank).
    """
    records = sorted((h.memory for h in heads if h.memory is not None), key=lambda m: m.peak_mb)
    head = records[(len(records) - 1) // 2] if records else None
    peaks = [r.memory.peak_mb for r in revs if r.memory is not None]
    return head, nearest(peaks, None if head is None else head.peak_mb)


def finish_paired(ctx: CaseContext, result: CaseResult) -> CaseResult:
    """``result`` with memory and start-up of HEAD judged against REV's side, and a
    regression's evidence."""
    data, v = ctx.session.paired, result.verdict
    if data is None or v is None:
        return result
    key = str(result.key)
    dp = data_parallel(result)  # no profile, memory or start-up of its own: see there
    why_no_base = None
    revs = [r[pairdata.REV].cases[key] for r in data.rounds if key in r[pairdata.REV].cases]
    heads = [r[pairdata.HEAD].cases[key] for r in data.rounds if key in r[pairdata.HEAD].cases]
    base_mb = None
    if not dp:
        result, why_no_base = take_profiles(result, data, key)
        memory, base_mb = paired_memory(revs, heads)
        result = replace(result, memory=memory)
    measured = [r.measurement for r in revs if r.measurement is not None]
    if measured and not dp:
        v = diagnosis.judge_startup(
            v,
            result.measurement,
            median([m.first_step_seconds for m in measured]),
            median([m.warmup_seconds for m in measured]),
        )
    changed = changes_between(revs[0], heads[0]) if revs and heads else []
    where = f"changed between {data.rev_label} and {data.head_name}: "
    line = where + ("; ".join(changed) or "nothing recorded (both sides ran here)")
    return _finish(ctx, result, v, base_mb, why_no_base or "", [line], data.rev_sha)


def _finish(
    ctx: CaseContext,
    result: CaseResult,
    v: Verdict,
    base_mb: float | None,
    why_no_base: str,
    changed: list[str],
    base_sha: str | None,
) -> CaseResult:
    """``result`` with ``v`` judged for memory, its warnings, and a regression's evidence."""
    s, dp = ctx.session.settings, data_parallel(result)
    grew = None
    if not dp:  # no memory record to judge (nor to stamp the marker's limit beside)
        v, grew = diagnosis.judge_memory(
            v,
            result,
            base_mb,
            tolerance=s.memory_tolerance,
            strict=s.strict,
            max_memory_mb=ctx.max_memory_mb,
        )
    # Said as warnings once the result is kept (a -W error run must not lose it).
    pending = [f"start-up grew: {x}" for x in v.startup] + ([grew] if grew else [])
    result = replace(result, warnings=[*result.warnings, *pending])
    ctx.pending_warnings += pending
    if v.outcome != Outcome.REGRESSED:
        return replace(result, verdict=v)
    operators: list[str] = []  # a data-parallel case is never profiled: no section
    if not dp:
        operators = evidence_lines.operator_lines(
            result.profile, result.baseline_profile, result.profile_error, why_no_base
        )
    memory = evidence_lines.memory_line(result, base_mb)
    notes = [memory] if memory else []
    notes += [f"start-up grew: {x}" for x in v.startup]
    root = ctx.session.run.commit.repo_root
    commits: list[str] = []
    if root:
        paths = evidence_lines.commit_paths(root, ctx.path)
        commits = evidence_lines.commit_lines(root, base_sha, ctx.session.run.commit.sha, paths)
    # The message's own layout (as a text read back: a line of a side's output may end in
    # a carriage return) with the evidence in reading order.
    lines = evidence_lines.with_evidence(v.message.splitlines(), operators, notes, changed, commits)
    return replace(result, verdict=replace(v, lines=lines))
