"""Paired evidence in the fixture: arbitration of a suspected stored-baseline regression, and
the verdict of a case in ``--mxperf-ab`` mode (the rounds themselves are in `pairing`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_mxperf import diagnosis, pairing
from pytest_mxperf.explain import (
    diff_stack,
    explain_arbitrated,
    explain_paired,
    explain_paired_scaling,
    what_changed,
)
from pytest_mxperf.paired import PairedEstimate
from pytest_mxperf.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.resolution import BaselineRef
from pytest_mxperf.stats import median
from pytest_mxperf.verdict import decide_arbitrated, decide_paired

if TYPE_CHECKING:
    from pytest_mxperf.fixture import MxPerf


def arbitrate(bench: MxPerf, result: CaseResult, ref: BaselineRef | None) -> str | None:
    """Measure the baseline commit's code paired with HEAD for a suspected stored-baseline
    regression (a stored figure from another host is no evidence, and block noise can
    hide a real loss from the stored threshold). The sides profile the case in their first
    round; returns why the baseline commit's profile is missing (None: it is there)."""
    assert result.verdict is not None
    sha = None if ref is None else ref.commit.get("sha")
    why_no_pair = bench._session.why_no_pair(sha) if sha else "the baseline names no commit"
    if ref is None or not sha or why_no_pair is not None:
        return f"no paired run of the baseline commit ({why_no_pair or 'no baseline'})"
    other = other_machine(bench, ref)
    try:
        data = bench._session.pairer.run(str(sha)[:10], str(sha), [bench._item.nodeid], _quiet)
    except pairing.PairSetupError as exc:
        # The stored judgement stands, saying why no pair could confirm it.
        result.verdict = result.verdict.explained(
            explain_arbitrated(
                result.verdict.message, result.verdict, None, "", "", [], other, str(exc)
            )
        )
        return f"no paired run of the baseline commit ({exc})"
    key = str(result.key)
    why_no_base = take_profiles(result, data, key)
    # A scaling regression (the stored efficiency decided) is confirmed or cleared on the
    # efficiency of the pair, not on its aggregate img/s.
    scaling = result.verdict.scaling
    if scaling:
        estimate = data.efficiency_estimate(key, bench._settings.min_effect)
        rounds = [pairing.describe_efficiency_round(p) for p in data.scaling_pairs(key)]
    else:
        estimate = data.estimate(key, bench._settings.min_effect)
        rounds = [pairing.describe_round(p) for p in data.pairs(key)]
    pair = None if estimate is None else decide_paired(estimate, bench._policy(0.0))
    changed = what_changed(result, ref)
    # What the baseline side of the pair did not reproduce: with --mxperf-env-command it runs
    # in the baseline commit's environment, and a pair that matches the baseline's software
    # judges code and software together; without it, everything that changed.
    revs = [r[pairing.REV].cases[key] for r in data.rounds if key in r[pairing.REV].cases]
    uncovered = what_changed(revs[0], ref) if revs else changed
    verdict = decide_arbitrated(result.verdict, pair, bool(uncovered), bench._settings.update)
    why = "; ".join(data.side_failures(pairing.REV) + data.side_failures(pairing.HEAD))
    message = explain_arbitrated(
        result.verdict.message,
        verdict,
        estimate,
        str(sha)[:10],
        ", ".join(rounds),
        changed,
        other,
        why_not=why or None,
        what="scaling efficiency" if scaling else "img/s",
    )
    result.verdict = verdict.explained(message)
    return why_no_base


def take_profiles(result: CaseResult, data: pairing.PairedData, key: str) -> str | None:
    """Put the sides' profiles of ``key`` on ``result`` (HEAD's side replaces one taken in
    this process: both sides then profiled alike); returns why REV's profile is missing."""
    sides = {
        side: [r[side].cases[key] for r in data.rounds if key in r[side].cases]
        for side in (pairing.REV, pairing.HEAD)
    }
    head = next((c for c in sides[pairing.HEAD] if c.profile is not None), None)
    if head is not None:
        result.profile, result.profile_error = head.profile, None
    elif result.profile is None:
        result.profile_error = (
            next((c.profile_error for c in sides[pairing.HEAD] if c.profile_error), None)
            or result.profile_error
            or "HEAD's side did not profile it"
        )
    traced = next((c for c in sides[pairing.HEAD] if c.profile_trace), None)
    if traced is not None and result.profile_trace is None:
        result.profile_trace, result.profile_table = traced.profile_trace, traced.profile_table
    rev = next((c for c in sides[pairing.REV] if c.profile is not None), None)
    if rev is not None:
        result.baseline_profile = rev.profile
        return None
    errors = [c.profile_error for c in sides[pairing.REV] if c.profile_error]
    failures = data.side_failures(pairing.REV)
    return (errors or failures or ["the baseline commit's side did not profile it"])[0]


def finish_stored(
    bench: MxPerf, result: CaseResult, ref: BaselineRef | None, why_no_base: str | None
) -> None:
    """Memory and start-up against the stored baseline, and a regression's evidence."""
    s, v = bench._settings, result.verdict
    if v is None or s.side_out:
        return
    base_mb = None if ref is None else ref.case.peak_memory_mb
    if ref is not None:
        case = ref.case
        v = diagnosis.judge_startup(
            v, result.measurement, case.first_step_seconds, case.warmup_seconds
        )
    sha = None if ref is None else ref.commit.get("sha")
    changed = [] if ref is None else what_changed(result, ref)
    line = diagnosis.CHANGED_PREFIX + " " + ("; ".join(changed) or "nothing recorded")
    result.verdict = _finish(
        bench, result, v, base_mb, why_no_base or "not profiled", [line], sha and str(sha)
    )


def finish_paired(bench: MxPerf, result: CaseResult) -> None:
    """Memory and start-up of HEAD against REV's side, and a regression's evidence."""
    data, v = bench._session.paired, result.verdict
    if data is None or v is None:
        return
    key = str(result.key)
    why_no_base = take_profiles(result, data, key)
    revs = [r[pairing.REV].cases[key] for r in data.rounds if key in r[pairing.REV].cases]
    heads = [r[pairing.HEAD].cases[key] for r in data.rounds if key in r[pairing.HEAD].cases]
    if result.memory is None:
        result.memory = next((h.memory for h in heads if h.memory is not None), None)
    peaks = [r.memory.peak_mb for r in revs if r.memory is not None]
    base_mb = median(peaks) if peaks else None
    measured = [r.measurement for r in revs if r.measurement is not None]
    if measured:
        v = diagnosis.judge_startup(
            v,
            result.measurement,
            median([m.first_step_seconds for m in measured]),
            median([m.warmup_seconds for m in measured]),
        )
    changed: list[str] = []
    if revs and heads:
        a, b = revs[0], heads[0]
        changed = diff_stack(a.software, b.software) + diff_stack(a.environment, b.environment)
        changed += diff_stack(a.threads, b.threads)
    where = f"changed between {data.rev_label} and HEAD: "
    line = where + ("; ".join(changed) or "nothing recorded (both sides ran here)")
    result.verdict = _finish(bench, result, v, base_mb, why_no_base or "", [line], data.rev_sha)


def _finish(
    bench: MxPerf,
    result: CaseResult,
    v: Verdict,
    base_mb: float | None,
    why_no_base: str,
    changed: list[str],
    base_sha: str | None,
) -> Verdict:
    s = bench._settings
    v, grew = diagnosis.judge_memory(
        v,
        result,
        base_mb,
        tolerance=s.memory_tolerance,
        strict=s.strict,
        max_memory_mb=bench._marker.max_memory_mb,
    )
    # Said as warnings once the result is kept (a -W error run must not lose it).
    pending = [f"start-up grew: {x}" for x in v.startup] + ([grew] if grew else [])
    result.warnings += pending
    bench._pending_warnings += pending
    if v.outcome != Outcome.REGRESSED:
        return v
    operators = diagnosis.operator_lines(
        result.profile, result.baseline_profile, result.profile_error, why_no_base
    )
    memory = diagnosis.memory_line(result, base_mb)
    notes = [memory] if memory else []
    notes += [f"start-up grew: {x}" for x in v.startup]
    root = bench._run.commit.repo_root
    commits: list[str] = []
    if root:
        paths = diagnosis.commit_paths(root, str(bench._item.path))
        commits = diagnosis.commit_lines(root, base_sha, bench._run.commit.sha, paths)
    message = diagnosis.with_evidence(v.message, operators, notes, changed, commits)
    return v.explained(message)


def other_machine(bench: MxPerf, ref: BaselineRef | None) -> bool:
    """Whether the baseline's runs were all stored by other machines (anonymous ids)."""
    ours, ids = bench._run.machine_id, () if ref is None else ref.case.machine_ids
    return bool(ours) and any(ids) and ours not in ids


def judge_pair(bench: MxPerf, result: CaseResult) -> None:
    data = bench._session.paired
    assert data is not None, "paired rounds run before the tests"
    key, s = str(result.key), bench._settings
    pairs = data.pairs(key)
    heads = [b for _, b in pairs] or [
        r[pairing.HEAD].cases[key] for r in data.rounds if key in r[pairing.HEAD].cases
    ]
    if not heads:
        failures = data.side_failures(pairing.HEAD, bench._item.nodeid)
        result.status = Status.ERROR
        result.error = "HEAD's side did not measure it: " + ("; ".join(failures) or "?")
        result.verdict = Verdict(Outcome.ERROR, True, f"{key}: {result.error}"[:1500])
        return
    ranked = sorted(heads, key=lambda r: r.images_per_sec or 0.0)
    middle = ranked[len(ranked) // 2]
    result.status, result.measurement, result.error = (
        middle.status,
        middle.measurement,
        middle.error,
    )
    result.software, result.threads = middle.software, middle.threads
    result.scaling = middle.scaling
    result.macs_per_image, result.peak_gflops = middle.macs_per_image, middle.peak_gflops
    result.memory = middle.memory
    result.attempts = [h.images_per_sec or 0.0 for h in heads]
    estimate = data.estimate(key, s.min_effect)
    verdict = decide_paired(estimate, bench._policy(0.0))
    revs = sorted(a.images_per_sec or 0.0 for a, _ in pairs)
    if revs:
        verdict = replace(
            verdict, baseline_images_per_sec=revs[len(revs) // 2], baseline_commit=data.rev_sha
        )
    failures = [] if pairs else data.side_failures(pairing.REV, bench._item.nodeid)
    message = explain_paired(
        result,
        verdict,
        estimate,
        data.rev_label,
        ", ".join(pairing.describe_round(p) for p in pairs),
        s.min_effect,
        failures,
    )
    if result.scaling is not None and estimate is not None:
        verdict, message = _pair_scaling(bench, result, verdict, message)
    result.verdict = verdict.explained(message)


def _pair_scaling(
    bench: MxPerf, result: CaseResult, verdict: Verdict, message: str
) -> tuple[Verdict, str]:
    """A data-parallel case in ``--mxperf-ab`` mode: its scaling efficiency is paired too, and a
    lower efficiency beyond the noise fails it like a lower img/s (the message then leads with
    the efficiency and the kvstore share of both sides)."""
    data, s = bench._session.paired, bench._settings
    assert data is not None
    key = str(result.key)
    estimate: PairedEstimate | None = data.efficiency_estimate(key, s.min_effect)
    if estimate is None:
        return verdict, message
    pairs = data.scaling_pairs(key)
    eff = decide_paired(estimate, bench._policy(0.0))
    regressed = eff.outcome == Outcome.REGRESSED
    scalings = [(a.scaling, b.scaling) for a, b in pairs]
    rev_eff = sorted(a.efficiency for a, _ in scalings if a is not None)
    rev_share = sorted(a.comm_share for a, _ in scalings if a is not None)
    head_share = sorted(b.comm_share for _, b in scalings if b is not None)
    text = explain_paired_scaling(
        result.scaling.kvstore if result.scaling else "?",
        estimate,
        regressed,
        data.rev_label,
        ", ".join(pairing.describe_efficiency_round(p) for p in pairs),
        (rev_share[len(rev_share) // 2], head_share[len(head_share) // 2]),
        s.min_effect,
    )
    verdict = replace(
        verdict,
        baseline_efficiency=rev_eff[len(rev_eff) // 2],
        baseline_comm_share=rev_share[len(rev_share) // 2],
        efficiency_change=estimate.ratio - 1,
    )
    if regressed and verdict.outcome != Outcome.REGRESSED:
        verdict = replace(verdict, outcome=Outcome.REGRESSED, failed=True, scaling=True)
        return verdict, f"{key}: {text}\naggregate: {message}"
    return verdict, f"{message}\n{text}"


def _quiet(_: str) -> None:
    """Arbitration happens inside a test: no progress lines between pytest's own."""
