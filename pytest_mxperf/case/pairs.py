"""Paired evidence in the fixture: arbitration of a suspected stored-baseline regression, and
the verdict of a case in ``--mxperf-ab`` mode (the rounds themselves are in `pairing` and
`pairdata`; the profiles, memory and start-up evidence in `fixture_evidence`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case.evidence import Arbitrated, CaseContext, data_parallel, take_profiles
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging.changes import sides_line, what_changed
from pytest_mxperf.judging.decisions import (
    decide_arbitrated,
    decide_arbitration_pair,
    decide_paired,
    decide_same_code,
)
from pytest_mxperf.judging.explain import (
    ELSEWHERE,
    explain_arbitrated,
    explain_paired,
    explain_same_code,
)
from pytest_mxperf.judging.explain_scaling import explain_paired_scaling
from pytest_mxperf.judging.pairstats import PairedEstimate
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.records import CaseResult, Outcome, Scaling, Status, Verdict
from pytest_mxperf.measuring.verdicts import Judged, message_lines
from pytest_mxperf.paired import pairdata, pairing
from pytest_mxperf.pipelines.timing import ALONE_FIGURES


def arbitrate(
    ctx: CaseContext, result: CaseResult, stored: Verdict, ref: BaselineRef | None
) -> Arbitrated:
    """Measure the baseline commit's code paired with HEAD for a suspected stored-baseline
    regression (a stored figure from another host is no evidence, and block noise can
    hide a real loss from the stored threshold): the measured ``result`` and its ``stored``
    verdict. The pair times this case and those after it in its test (the cases before it are
    judged: the sides get their results from here); the sides profile the case in their first
    round."""
    sha = None if ref is None else ref.commit.get("sha")
    why_no_pair = ctx.session.why_no_pair(sha) if sha else "the baseline names no commit"
    if ref is None or not sha or why_no_pair is not None:
        return Arbitrated(
            {}, stored, f"no paired run of the baseline commit ({why_no_pair or 'no baseline'})"
        )
    other = other_machine(ctx.session.run.machine_id, ref)
    changed = what_changed(result, ref)
    if ctx.session.nothing_to_pair(str(sha), bool(changed)):
        decided = decide_same_code(stored, bool(changed))
        explained = explain_same_code(stored, decided, str(sha)[:10], changed, other)
        return Arbitrated({}, explained, None)  # nothing paired: no profile missing
    try:
        data = _pair(ctx, result, str(sha))
    except pairing.PairSetupError as exc:
        # The stored judgement stands, saying why no pair could confirm it.
        explained = explain_arbitrated(stored, stored, None, "", "", [], other, str(exc))
        return Arbitrated({}, explained, f"no paired run of the baseline commit ({exc})")
    key = result.key
    why_no_base = None
    profiles: dict[str, Any] = {}
    if not data_parallel(result):  # never profiled: no profile is missing from it
        profiles, why_no_base = take_profiles(result, data, key)
    scaling = stored.scaling
    estimate, rounds = _pair_estimate(data, key, scaling, ctx.session.settings.min_effect)
    pair = None if estimate is None else decide_arbitration_pair(estimate, stored, ctx.policy)
    # What the baseline side of the pair did not reproduce: with --mxperf-env-command it runs
    # in the baseline commit's environment, and a pair that matches the baseline's software
    # judges code and software together; without it, everything that changed.
    revs = [r[pairdata.REV].cases[key] for r in data.rounds if key in r[pairdata.REV].cases]
    uncovered = what_changed(revs[0], ref) if revs else changed
    verdict = decide_arbitrated(stored, pair, bool(uncovered), ctx.session.settings.update)
    why = "; ".join(data.side_failures(pairdata.REV) + data.side_failures(pairdata.HEAD))
    verdict = explain_arbitrated(
        stored,
        verdict,
        estimate,
        str(sha)[:10],
        ", ".join(rounds),
        changed,
        other,
        why_not=why or None,
        what="scaling efficiency" if scaling else "img/s",
        budget_spent=data.budget_spent,
    )
    sides = sides_line(revs[0], result, f"baseline commit {str(sha)[:10]}") if revs else None
    if sides and estimate is not None:
        verdict = verdict.adding(sides)
    return Arbitrated(profiles, verdict, why_no_base)


def _pair(ctx: CaseContext, result: CaseResult, sha: str) -> pairdata.PairedData:
    """The paired run of ``sha`` and HEAD over ``result``'s test (its own, or one of this
    session that measured it): the test's cases judged before this one are handed back to the
    sides, not timed."""
    done = [c for c in ctx.kept if c.key != result.key]
    clears = ctx.session.clears(result.hardware)
    pairer = ctx.session.pairer
    focus = [result.key]  # its test-mates after it: their first rounds only, unless suspected
    return pairer.run(sha[:10], sha, [ctx.nodeid], _quiet, clears=clears, handed=done, focus=focus)


def _pair_estimate(
    data: pairdata.PairedData, key: CaseKey, scaling: bool, min_effect: float
) -> tuple[PairedEstimate | None, list[str]]:
    """The pair's estimate for ``key`` and its rounds' text. A scaling regression (the stored
    efficiency decided) is confirmed or cleared on the efficiency of the pair, not on its
    aggregate img/s."""
    if scaling:
        rounds = [pairdata.describe_efficiency_round(p) for p in data.scaling_pairs(key)]
        return data.efficiency_estimate(key, min_effect), rounds
    return data.estimate(key, min_effect), [pairdata.rounds_text(data, key)]


def other_machine(ours: str | None, ref: BaselineRef | None) -> bool:
    """Whether the baseline's runs were all stored by other machines (anonymous ids); ``ours``
    is this machine's id."""
    ids = () if ref is None else ref.case.machine_ids
    return bool(ours) and any(ids) and ours not in ids


def unconfirmed(
    judged: Judged, tight: Verdict, why_not: str, elsewhere: bool, changed: list[str]
) -> Judged:
    """The verdict of a case no paired run can check (``why_not``), judged with the floor for
    unconfirmed drops.

    A regression says it was not confirmed (and when the baseline was measured on another
    machine). A pass whose drop fails ``tight`` (the same case decided at the threshold a pair
    would allow: this machine's noise) says that it is beyond the noise, why it did not fail,
    and what changed since the baseline (an MXNet upgrade that costs 15% passes the 20% floor,
    and the user should hear of it), in its message and ``unconfirmed`` (the run's summary
    counts them). Not a warning: a project that makes warnings errors would fail the test."""
    verdict = judged.decision
    if verdict.outcome == Outcome.REGRESSED:
        note = f"not confirmed by a paired run ({why_not}): judged against the stored figure"
        if elsewhere:
            note += ELSEWHERE
        return Judged(verdict, judged.lines + message_lines(note), judged.unconfirmed)
    if verdict.outcome != Outcome.PASS or tight.outcome != Outcome.REGRESSED:
        return judged
    assert tight.change is not None and tight.threshold is not None
    assert verdict.threshold is not None
    note = (
        f"{-tight.change:.1%} below its baseline, beyond this machine's noise (threshold "
        f"{tight.threshold:.1%}); not failed: without a paired run ({why_not}) a drop fails "
        f"beyond {verdict.threshold:.1%}"
    )
    if changed:
        note += "; changed since the baseline: " + "; ".join(changed)
    return Judged(verdict, judged.lines + message_lines(note), unconfirmed=note)


def judge_pair(ctx: CaseContext, result: CaseResult) -> tuple[dict[str, Any], Judged]:
    """A case in ``--mxperf-ab`` mode: HEAD's figures (the record's fields) and the verdict
    from the rounds the sides measured, before its evidence."""
    data = ctx.session.paired
    assert data is not None, "paired rounds run before the tests"
    key, s = result.key, ctx.session.settings
    pairs = data.pairs(key)
    heads = _heads(data, key)
    if not heads:
        failures = data.side_failures(pairdata.HEAD, ctx.nodeid)
        error = f"{data.head_name}'s side did not measure it: " + ("; ".join(failures) or "?")
        said = Judged(Verdict(Outcome.ERROR, True), message_lines(f"{key}: {error}"[:1500]))
        return {"status": Status.ERROR, "error": error}, said
    broken = data.broken_message(key)
    if broken is not None:
        # An error (or NaN, or nothing measured) on either side is that, never "new": the
        # pair cannot clear a case one side failed, as a plain run would fail it.
        status, error = broken
        outcome = Outcome.NAN if status == Status.NAN else Outcome.ERROR
        said = Judged(Verdict(outcome, True), message_lines(f"{key}: {error}"[:3000]))
        last = heads[-1]
        figures: dict[str, Any] = {"status": status, "error": error, "software": last.software}
        return {**figures, "threads": last.threads}, said
    estimate = data.estimate(key, s.min_effect)
    # A regression the run's second run (on fresh processes) decided: its figures are shown.
    if estimate is not None and estimate.first is not None and data.confirmation is not None:
        pairs, heads = data.confirmation.pairs(key), _heads(data.confirmation, key)
    figures = _middle(heads)
    verdict = decide_paired(estimate, ctx.policy)
    revs = sorted(a.images_per_sec or 0.0 for a, _ in pairs)
    if revs:
        verdict = replace(
            verdict, baseline_images_per_sec=revs[len(revs) // 2], baseline_commit=data.rev_sha
        )
    failures = [] if pairs else data.side_failures(pairdata.REV, ctx.nodeid)
    message = explain_paired(
        result,
        verdict,
        estimate,
        data.rev_label,
        pairdata.rounds_text(data, key),
        s.min_effect,
        failures,
        data.head_name,
        data.budget_spent,
    )
    sides = (
        sides_line(pairs[-1][0], pairs[-1][1], data.rev_label, data.head_name) if pairs else None
    )
    lines = message_lines(message) + (message_lines(sides) if sides else ())
    said = Judged(verdict, lines)
    scaling = figures["scaling"]
    if scaling is not None and estimate is not None:
        said = _pair_scaling(ctx, key, scaling, said)
    return figures, said


def _heads(data: pairdata.PairedData, key: CaseKey) -> list[CaseResult]:
    """HEAD's results of ``key``: from the rounds both sides measured, else from any."""
    pairs = data.pairs(key)
    return [b for _, b in pairs] or [
        r[pairdata.HEAD].cases[key] for r in data.rounds if key in r[pairdata.HEAD].cases
    ]


def _middle(heads: list[CaseResult]) -> dict[str, Any]:
    """The figures (a record's fields) of HEAD's round with the median img/s, and all rounds'
    as its attempts."""
    ranked = sorted(heads, key=lambda r: r.images_per_sec or 0.0)
    middle = ranked[len(ranked) // 2]
    return {
        "status": middle.status,
        "measurement": _with_alone_figures(middle, heads),
        "error": middle.error,
        "software": middle.software,
        "threads": middle.threads,
        "scaling": middle.scaling,
        "macs_per_image": middle.macs_per_image,
        "peak_gflops": middle.peak_gflops,
        "memory": middle.memory,
        "attempts": [h.images_per_sec or 0.0 for h in heads],
    }


def _with_alone_figures(middle: CaseResult, heads: list[CaseResult]) -> Measurement | None:
    """``middle``'s measurement with an end-to-end case's model-alone and pipeline-alone figures
    from HEAD's first round that measured them, where its own round left them out (a side's
    later rounds time the training only: `timing.run_end_to_end`). Only end-to-end cases have
    them: any other case's measurement is returned as it is."""
    m = middle.measurement
    if m is None or any(name in m.extra for name in ALONE_FIGURES):
        return m
    for head in heads:
        extra = head.measurement.extra if head.measurement is not None else {}
        if all(name in extra for name in ALONE_FIGURES):
            return replace(m, extra={**m.extra, **{name: extra[name] for name in ALONE_FIGURES}})
    return m


def adopt_head(result: CaseResult, data: pairdata.PairedData) -> CaseResult | None:
    """``result`` with its figures from HEAD's side of a run's joint pair (`case.jointpair`),
    as paired mode takes them; None when a side failed it or HEAD has no figure: the case is
    then measured here as usual."""
    key = result.key
    heads = _heads(data, key)
    if not heads or data.broken_message(key) is not None:
        return None
    figures = _middle(heads)
    return None if figures["measurement"] is None else replace(result, **figures)


def _pair_scaling(ctx: CaseContext, key: CaseKey, scaling: Scaling, said: Judged) -> Judged:
    """A data-parallel case in ``--mxperf-ab`` mode (HEAD's ``scaling``): its scaling
    efficiency is paired too, and a lower efficiency beyond the noise fails it like a lower
    img/s (the message then leads with the efficiency and the kvstore share of both sides)."""
    data, s = ctx.session.paired, ctx.session.settings
    assert data is not None
    estimate: PairedEstimate | None = data.efficiency_estimate(key, s.min_effect)
    if estimate is None:
        return said
    pairs = data.scaling_pairs(key)
    eff = decide_paired(estimate, ctx.policy)
    regressed = eff.outcome == Outcome.REGRESSED
    scalings = [(a.scaling, b.scaling) for a, b in pairs]
    rev_eff = sorted(a.efficiency for a, _ in scalings if a is not None)
    rev_share = sorted(a.comm_share for a, _ in scalings if a is not None)
    head_share = sorted(b.comm_share for _, b in scalings if b is not None)
    text = explain_paired_scaling(
        scaling.kvstore,
        estimate,
        regressed,
        data.rev_label,
        ", ".join(pairdata.describe_efficiency_round(p) for p in pairs),
        (rev_share[len(rev_share) // 2], head_share[len(head_share) // 2]),
        s.min_effect,
        data.head_name,
    )
    lines = said.lines
    verdict = replace(
        said.decision,
        baseline_efficiency=rev_eff[len(rev_eff) // 2],
        baseline_comm_share=rev_share[len(rev_share) // 2],
        efficiency_change=estimate.ratio - 1,
    )
    if regressed and verdict.outcome != Outcome.REGRESSED:
        verdict = replace(verdict, outcome=Outcome.REGRESSED, failed=True, scaling=True)
        aggregate = ("aggregate: " + lines[0], *lines[1:])
        return Judged(verdict, message_lines(f"{key}: {text}") + aggregate, said.unconfirmed)
    return Judged(verdict, lines + message_lines(text), said.unconfirmed)


def _quiet(_: str) -> None:
    """Arbitration happens inside a test: no progress lines between pytest's own."""
