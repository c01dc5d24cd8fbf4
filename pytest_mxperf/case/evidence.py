"""A measured case's diagnosis in the fixture: the sides' operator profiles taken onto it,
peak memory and start-up judged against the baseline (stored, or the paired run's other side),
and a regression's evidence (operators, memory, start-up, what changed, commits since)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple, Optional

from pytest_mxperf.baselines.kept_runs import nearest
from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging import evidence_lines
from pytest_mxperf.judging.changes import changes_between, what_changed
from pytest_mxperf.judging.decisions import Policy
from pytest_mxperf.measuring import diagnosis
from pytest_mxperf.measuring.memory import MemoryRecord
from pytest_mxperf.measuring.records import CaseResult, Outcome, Verdict
from pytest_mxperf.measuring.stats import median
from pytest_mxperf.measuring.verdicts import Finding, Judged, render_message
from pytest_mxperf.paired import pairdata
from pytest_mxperf.run.session import MxperfSession

#: What a method finds in a case's figures beside its verdict (an end-to-end case: whether it is
#: input-bound), the part its verdict is built with; None: nothing. Optional, not ``X | None``:
#: this alias is evaluated at import, and Python 3.9 has no ``|`` between types.
Finds = Callable[[CaseResult], Optional[Finding]]


def found_in(finds: Finds | None, figures: CaseResult) -> tuple[Finding, ...]:
    """What ``finds`` (a method's, None: it has none) finds in the record with its ``figures``."""
    found = None if finds is None else finds(figures)
    return () if found is None else (found,)


@dataclass
class CaseContext:
    """What the paired and evidence steps need of the test measuring a case: its session, node
    id and file, the fixture's policy at tolerance 0, the marker's memory limit, the warnings to
    say once the case is kept (appended to here), and the test's cases kept so far."""

    session: MxperfSession
    nodeid: str
    path: str
    policy: Policy
    max_memory_mb: float | None = None
    pending_warnings: list[str] = field(default_factory=list)
    kept: tuple[CaseResult, ...] = ()


def take_profiles(
    result: CaseResult, data: pairdata.PairedData, key: CaseKey
) -> tuple[dict[str, Any], str | None]:
    """The profile fields of ``result`` from the sides' profiles of ``key`` (HEAD's side
    replaces one taken in this process: both sides then profiled alike), and why REV's profile
    is missing."""
    rounds = data.rounds + data.profile_rounds
    sides = {
        side: [r[side].cases[key] for r in rounds if key in r[side].cases]
        for side in (pairdata.REV, pairdata.HEAD)
    }
    fields: dict[str, Any] = {}
    head = next((c for c in sides[pairdata.HEAD] if c.profile is not None), None)
    if head is not None:
        fields.update(profile=head.profile, profile_error=None)
    elif result.profile is None:
        fields["profile_error"] = (
            next((c.profile_error for c in sides[pairdata.HEAD] if c.profile_error), None)
            or result.profile_error
            or "HEAD's side did not profile it"
        )
    traced = next((c for c in sides[pairdata.HEAD] if c.profile_trace), None)
    if traced is not None and result.profile_trace is None:
        fields.update(profile_trace=traced.profile_trace, profile_table=traced.profile_table)
    rev = next((c for c in sides[pairdata.REV] if c.profile is not None), None)
    if rev is not None:
        return {**fields, "baseline_profile": rev.profile}, None
    errors = [c.profile_error for c in sides[pairdata.REV] if c.profile_error]
    failures = data.side_failures(pairdata.REV)
    unprofiled = "the paired run profiles only the cases it finds slower"
    return fields, (errors or failures or [unprofiled])[0]


def data_parallel(result: CaseResult) -> bool:
    """Whether ``result`` is a data-parallel case (`case.dataparallel`): its ranks run in their
    own processes (or one process drives every device) under the launcher, so it has no
    operator profile and no memory record, and its start-up figures are one rank's (the
    noisiest, which differs between runs) including the kvstore's set-up. Only a regression's
    "what changed" and commits apply to it; the other steps here skip it."""
    return result.key.world_size is not None


def finish_stored(
    ctx: CaseContext,
    result: CaseResult,
    judged: Judged,
    ref: BaselineRef | None,
    why_no_base: str | None,
    found: Sequence[Finding] = (),
) -> tuple[Verdict, list[str]]:
    """The verdict of the measured ``result`` (``judged`` against the stored baseline), with
    memory and start-up judged against that baseline, a regression's evidence and what else
    was ``found``; and the warnings that adds to the result's."""
    dp = data_parallel(result)  # no memory or start-up of its own: see there
    now_mb = None if result.memory is None else result.memory.peak_mb
    base_mb = None if ref is None or dp else ref.case.memory_reference(now_mb)
    startup = None
    if ref is not None and not dp:
        case = ref.case
        startup = diagnosis.judge_startup(
            result.measurement, case.first_step_seconds, case.warmup_seconds
        )
    sha = None if ref is None else ref.commit.get("sha")
    changed = [] if ref is None else what_changed(result, ref)
    line = evidence_lines.CHANGED_PREFIX + " " + ("; ".join(changed) or "nothing recorded")
    why = why_no_base or "not profiled"
    return _finish(ctx, result, judged, startup, base_mb, why, [line], sha and str(sha), found)


class Arbitrated(NamedTuple):
    """A suspected case's parts from its pair: the profile fields the sides took (none when no
    pair ran), the pair's verdict, and why the baseline commit's profile is missing (None: it
    is there)."""

    profiles: dict[str, Any]
    verdict: Verdict
    why_no_base: str | None


def finish_judged(
    ctx: CaseContext,
    measured: CaseResult,
    arbitrated: Arbitrated,
    window: list[float],
    ref: BaselineRef | None,
    found: Sequence[Finding] = (),
) -> CaseResult:
    """The record of a suspected case, assembled from its parts: the ``measured`` figures in
    their ``window``, the sides' profiles, and `finish_stored` of the pair's verdict
    (``arbitrated``) with what else was ``found``."""
    figures = replace(measured, **arbitrated.profiles)  # what the evidence reads
    judged = Judged.of(arbitrated.verdict)
    why = arbitrated.why_no_base
    verdict, pending = finish_stored(ctx, figures, judged, ref, why, found)
    # The record assembled (as `roles.StoredJudge.settle` assembles an unsuspected one).
    warned = [*figures.warnings, *pending]
    return replace(figures, verdict=verdict, window=window, warnings=warned)


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


def finish_paired(
    ctx: CaseContext,
    result: CaseResult,
    figures: dict[str, Any],
    judged: Judged,
    finds: Finds | None = None,
) -> CaseResult:
    """The record of ``result``'s case in ``--mxperf-ab`` mode, assembled once: HEAD's
    ``figures`` and the sides' profiles and memory, and the verdict (``judged`` from the
    rounds) with memory and start-up of HEAD judged against REV's side, a regression's
    evidence and what the method ``finds`` in HEAD's figures."""
    data = ctx.session.paired
    assert data is not None, "paired rounds run before the tests"
    key = result.key
    dp = data_parallel(result)  # no profile, memory or start-up of its own: see there
    why_no_base = None
    revs = [r[pairdata.REV].cases[key] for r in data.rounds if key in r[pairdata.REV].cases]
    heads = [r[pairdata.HEAD].cases[key] for r in data.rounds if key in r[pairdata.HEAD].cases]
    base_mb = None
    if not dp:
        profiles, why_no_base = take_profiles(result, data, key)
        memory, base_mb = paired_memory(revs, heads)
        figures = {**figures, **profiles, "memory": memory}
    result = replace(result, **figures)
    measured = [r.measurement for r in revs if r.measurement is not None]
    startup = None
    if measured and not dp:
        startup = diagnosis.judge_startup(
            result.measurement,
            median([m.first_step_seconds for m in measured]),
            median([m.warmup_seconds for m in measured]),
        )
    changed = changes_between(revs[0], heads[0]) if revs and heads else []
    where = f"changed between {data.rev_label} and {data.head_name}: "
    line = where + ("; ".join(changed) or "nothing recorded (both sides ran here)")
    why = why_no_base or ""
    found = found_in(finds, result)
    verdict, pending = _finish(
        ctx, result, judged, startup, base_mb, why, [line], data.rev_sha, found
    )
    return replace(result, verdict=verdict, warnings=[*result.warnings, *pending])


def _finish(
    ctx: CaseContext,
    result: CaseResult,
    judged: Judged,
    startup: tuple[str, ...] | None,
    base_mb: float | None,
    why_no_base: str,
    changed: list[str],
    base_sha: str | None,
    found: Sequence[Finding],
) -> tuple[Verdict, list[str]]:
    """The verdict of ``result``, built once from ``judged``, its ``startup`` flags (None: not
    judged), its memory judged, a regression's evidence and what else was ``found`` (in that
    order); and the warnings it adds."""
    s, v = ctx.session.settings, judged.decision
    startup = v.startup if startup is None else startup
    if data_parallel(result):  # no memory record to judge (nor to stamp the marker's limit)
        mem = diagnosis.MemoryJudged(
            v.baseline_memory_mb, v.max_memory_mb, v.memory_trend, judged.lines
        )
    else:
        mem = diagnosis.judge_memory(
            v,
            judged.lines,
            result,
            base_mb,
            tolerance=s.memory_tolerance,
            strict=s.strict,
            max_memory_mb=ctx.max_memory_mb,
        )
    # Said as warnings once the result is kept (a -W error run must not lose it).
    pending = [f"start-up grew: {x}" for x in startup] + ([mem.warning] if mem.warning else [])
    ctx.pending_warnings += pending
    outcome = Outcome.MEMORY if mem.fails else v.outcome
    lines = mem.lines
    if outcome == Outcome.REGRESSED:
        lines = _with_evidence(ctx, result, lines, startup, base_mb, why_no_base, changed, base_sha)
    for finding in found:
        outcome, lines = finding.placed(outcome, lines)
    verdict = replace(
        v,
        outcome=outcome,
        failed=v.failed or mem.fails,
        lines=lines,
        unconfirmed=judged.unconfirmed,
        startup=startup,
        baseline_memory_mb=mem.baseline_memory_mb,
        max_memory_mb=mem.max_memory_mb,
        memory_trend=mem.memory_trend,
    )
    return verdict, pending


def _with_evidence(
    ctx: CaseContext,
    result: CaseResult,
    lines: tuple[str, ...],
    startup: tuple[str, ...],
    base_mb: float | None,
    why_no_base: str,
    changed: list[str],
    base_sha: str | None,
) -> tuple[str, ...]:
    """A regression's message ``lines`` with its evidence: operators, memory and start-up,
    what changed, the commits since the baseline."""
    operators: list[str] = []  # a data-parallel case is never profiled: no section
    if not data_parallel(result):
        operators = evidence_lines.operator_lines(
            result.profile, result.baseline_profile, result.profile_error, why_no_base
        )
    memory = evidence_lines.memory_line(result, base_mb)
    notes = [memory] if memory else []
    notes += [f"start-up grew: {x}" for x in startup]
    root = ctx.session.run.commit.repo_root
    commits: list[str] = []
    if root:
        paths = evidence_lines.commit_paths(root, ctx.path)
        commits = evidence_lines.commit_lines(root, base_sha, ctx.session.run.commit.sha, paths)
    # The message's own layout (as a text read back: a line of a side's output may end in
    # a carriage return) with the evidence in reading order.
    text = render_message(lines).splitlines()
    return evidence_lines.with_evidence(text, operators, notes, changed, commits)
