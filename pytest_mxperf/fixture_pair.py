"""Paired evidence in the fixture: arbitration of a suspected stored-baseline regression, and
the verdict of a case in ``--mxperf-ab`` mode (the rounds themselves are in `pairing`)."""

from __future__ import annotations

from dataclasses import replace

from pytest_mxperf import pairing
from pytest_mxperf.explain import (
    explain_arbitrated,
    explain_paired,
    what_changed,
)
from pytest_mxperf.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.resolution import BaselineRef
from pytest_mxperf.session import MxperfSession
from pytest_mxperf.verdict import Policy, decide_arbitrated, decide_paired


def arbitrate(
    session: MxperfSession,
    nodeid: str,
    result: CaseResult,
    ref: BaselineRef | None,
    policy: Policy,
) -> None:
    """Measure the baseline commit's code paired with HEAD for a suspected stored-baseline
    regression (a stored figure from another host is no evidence, and block noise can
    hide a real loss from the stored threshold)."""
    assert result.verdict is not None
    sha = None if ref is None else ref.commit.get("sha")
    if ref is None or not sha or session.why_no_pair(sha) is not None:
        return
    data = session.pairer.run(str(sha)[:10], str(sha), [nodeid], _quiet)
    key = str(result.key)
    estimate = data.estimate(key, session.settings.min_effect)
    pair = None if estimate is None else decide_paired(estimate, policy)
    changed = what_changed(result, ref)
    verdict = decide_arbitrated(result.verdict, pair, bool(changed), session.settings.update)
    other = other_machine(session.run.machine_id, ref)
    why = "; ".join(data.side_failures(pairing.REV) + data.side_failures(pairing.HEAD))
    message = explain_arbitrated(
        result.verdict.message,
        verdict,
        estimate,
        str(sha)[:10],
        ", ".join(pairing.describe_round(p) for p in data.pairs(key)),
        changed,
        other,
        why_not=why or None,
    )
    result.verdict = verdict.explained(message)


def other_machine(ours: str | None, ref: BaselineRef | None) -> bool:
    """Whether the baseline's runs were all stored by other machines (anonymous ids); ``ours``
    is this machine's id."""
    ids = () if ref is None else ref.case.machine_ids
    return bool(ours) and any(ids) and ours not in ids


def judge_pair(session: MxperfSession, nodeid: str, result: CaseResult, policy: Policy) -> None:
    """The verdict of a case in ``--mxperf-ab`` mode from the rounds the sides measured;
    ``policy`` is the fixture's at tolerance 0."""
    data = session.paired
    assert data is not None, "paired rounds run before the tests"
    key, s = str(result.key), session.settings
    pairs = data.pairs(key)
    heads = [b for _, b in pairs] or [
        r[pairing.HEAD].cases[key] for r in data.rounds if key in r[pairing.HEAD].cases
    ]
    if not heads:
        failures = data.side_failures(pairing.HEAD, nodeid)
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
    result.attempts = [h.images_per_sec or 0.0 for h in heads]
    estimate = data.estimate(key, s.min_effect)
    verdict = decide_paired(estimate, policy)
    revs = sorted(a.images_per_sec or 0.0 for a, _ in pairs)
    if revs:
        verdict = replace(
            verdict, baseline_images_per_sec=revs[len(revs) // 2], baseline_commit=data.rev_sha
        )
    failures = [] if pairs else data.side_failures(pairing.REV, nodeid)
    message = explain_paired(
        result,
        verdict,
        estimate,
        data.rev_label,
        ", ".join(pairing.describe_round(p) for p in pairs),
        s.min_effect,
        failures,
    )
    result.verdict = verdict.explained(message)


def _quiet(_: str) -> None:
    """Arbitration happens inside a test: no progress lines between pytest's own."""
