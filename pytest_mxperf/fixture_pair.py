"""Paired evidence in the fixture: arbitration of a suspected stored-baseline regression, and
the verdict of a case in ``--mxperf-ab`` mode (the rounds themselves are in `pairing`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_mxperf import pairing
from pytest_mxperf.explain import (
    explain_arbitrated,
    explain_paired,
    what_changed,
)
from pytest_mxperf.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.resolution import BaselineRef
from pytest_mxperf.verdict import decide_arbitrated, decide_paired

if TYPE_CHECKING:
    from pytest_mxperf.fixture import MxPerf


def arbitrate(bench: MxPerf, result: CaseResult, ref: BaselineRef | None) -> None:
    """Measure the baseline commit's code paired with HEAD for a suspected stored-baseline
    regression (a stored figure from another host is no evidence, and block noise can
    hide a real loss from the stored threshold)."""
    assert result.verdict is not None
    sha = None if ref is None else ref.commit.get("sha")
    if ref is None or not sha or bench._session.why_no_pair(sha) is not None:
        return
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
        return
    key = str(result.key)
    estimate = data.estimate(key, bench._settings.min_effect)
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
        ", ".join(pairing.describe_round(p) for p in data.pairs(key)),
        changed,
        other,
        why_not=why or None,
    )
    result.verdict = verdict.explained(message)


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
    result.verdict = verdict.explained(message)


def _quiet(_: str) -> None:
    """Arbitration happens inside a test: no progress lines between pytest's own."""
