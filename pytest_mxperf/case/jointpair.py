"""Before a run's first case: do the stored figures describe this machine? If the calibration
probe says they do not, one paired run of the stored file's commit and HEAD measures every
remaining case of the run, and each case takes its figure and its verdict from it. Where the
probe cannot tell (a file stored before calibrations, or a machine that runs the probe as fast
but the models slower), the run's own cases can: once `EVIDENCE` cases measured beyond their
stored thresholds were found no slower than the baseline commit's code by their own pairs
(``machine``), the rest of the run is measured in one joint pair the same way.

Why: on a machine the stored figures do not describe (hosted CI lands on a new VM every job),
every case looks slower or faster than its baseline, and each would be arbitrated by a paired
run of its own: sides started, the case built and warmed again per round, for every case. One
pair of all of them measures each case once per side per round, with the sides' setups
overlapping: about a paired run's cost in place of a plain run plus fifteen pairs. Nothing is
scaled: a case is still compared with its stored figure first (so the table and the summary
show how far off the machine is), and the pair decides whether the code is slower.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Callable

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case.bench import Bench
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.markers import is_benchmark
from pytest_mxperf.measuring.calibrate import calibrate
from pytest_mxperf.measuring.records import CaseResult, Outcome, Verdict
from pytest_mxperf.measuring.verdicts import Finding
from pytest_mxperf.paired.pairdata import PairedData
from pytest_mxperf.paired.pairing import PairSetupError
from pytest_mxperf.run.preflight import THRESHOLD, Undecided

#: Cases that their own pairs found off their stored figures through the machine (not slower
#: code) before the rest of a run is measured in one joint pair: one could be a case the
#: machine treats differently; two of one baseline commit, in a run that has more to measure,
#: are the machine (a machine off its stored figures otherwise pairs most cases one by one:
#: docs/measurements.md, "Moved from code comments"), when they are also more than half of
#: the cases judged against that commit's figures so far (`off_enough`).
EVIDENCE = 2


def off_enough(found: int, judged: int) -> bool:
    """Do ``found`` cases off their stored figures through the machine, of ``judged`` cases
    judged against the same commit's figures so far, start the joint pair? At least
    `EVIDENCE`, and more than half: a joint pair measures every case after them, which costs
    less than their own pairs only when most of those would be paired too. A slower hour in
    which a few cases wander off while most hold keeps its plain run."""
    return found >= EVIDENCE and 2 * found > judged


def for_update(bench: Bench, result: CaseResult, ctx: Any) -> float | None:
    """``--mxperf-update``: the calibration of ``result``'s case, the probe measured beside the
    first case of each hardware key in this process (inside the device lock), for the stored
    file's calibration; the record's own for the others."""
    pf = bench.session.preflight
    if result.hardware in pf.calibrated:
        return result.calibration
    pf.calibrated.add(result.hardware)
    return _probe(bench, ctx)


Lock = Callable[[], contextlib.AbstractContextManager[None]]


def joint_pair(bench: Bench, result: CaseResult, ctx: Any, lock: Lock) -> PairedData | None:
    """The joint pair that covers this case, deciding once per run whether to run it (at the
    first case with a stored baseline: the probe inside ``lock``, the device's; the pair
    outside it, as its controller takes every device's lock for its rounds)."""
    pf = bench.session.preflight
    ref = bench.run.baseline_for(result.hardware, result.key)
    if ref is not None and pf.data is None:  # judged against this commit's figures
        pf.judged[ref.sha] += 1
    if not pf.decided and _may_decide(bench):
        if ref is not None:
            pf.decided = True
            _decide(bench, ref, ctx, lock, result.hardware)
    elif pf.evidence_sha is not None and pf.data is None and _may_decide(bench):
        sha, pf.evidence_sha = pf.evidence_sha, None
        _pair_on_evidence(bench, sha, result.hardware)
    return pf.covers(result.key)


def note_arbitrated(
    bench: Bench,
    key: CaseKey,
    verdict: Verdict,
    sha: str | None,
    again: Callable[[Finding], CaseResult],
) -> None:
    """After a suspected case's own pair with commit ``sha`` (the case ``key``, ``verdict``
    the pair's): count it as evidence that the stored figures do not hold here when it
    measured below its stored threshold and the pair found the code no slower (``machine``);
    at `EVIDENCE` such cases of one commit the next case starts the run's joint pair
    (`joint_pair`). A case that passed within its threshold and was paired for being more than
    half of it below (a pass the pair confirmed) is no such evidence: the stored figures held
    for it, as they do on a slower hour of the machine that stored them. Either is noted as a
    drop the hour explains (`Preflight.explained`). A case the pair left inconclusive is kept
    for that joint pair instead: it measures the case again, its own pair's rounds counted as
    its first, and ``again`` judges it from them all (`_judge_again`)."""
    pf = bench.session.preflight
    if (
        not sha
        or pf.data is not None
        or verdict.rounds is None  # no pair ran (same code, or none could)
        or verdict.change is None
        or verdict.change >= 0
    ):
        return
    if verdict.outcome == Outcome.INCONCLUSIVE:
        _keep_undecided(bench, key, sha, again)
        return
    if verdict.outcome in (Outcome.PASS, Outcome.MACHINE):
        pf.note_cleared(sha, verdict.change)
    if pf.evidence_used or verdict.outcome != Outcome.MACHINE:
        return
    found = pf.off.setdefault(sha, [])
    found.append(verdict.change)
    if off_enough(len(found), pf.judged[sha]):
        pf.evidence_sha, pf.evidence_used = sha, True


def _keep_undecided(
    bench: Bench, key: CaseKey, sha: str, again: Callable[[Finding], CaseResult]
) -> None:
    """Keep a case its own pair left inconclusive for the run's joint pair, if one may still
    start (not under ``--mxperf-strict``: there the case has failed, and stays failed)."""
    if bench.session.settings.strict or not _may_decide(bench):
        return
    own = bench.session.pairer.cached(sha, [bench.item.nodeid])
    rounds = [] if own is None else own.pairs(key)
    if len(rounds) >= 2:
        pf = bench.session.preflight
        pf.undecided.append(Undecided(sha, bench.item.nodeid, key, rounds, again))


def _may_decide(bench: Bench) -> bool:
    # Only the stored judge asks (`case.roles.StoredJudge`): never a paired run's controller
    # or side.
    s = bench.session
    return not (s.settings.update or s.is_worker)


def _probe(bench: Bench, ctx: Any) -> float | None:
    try:
        return calibrate(bench.backend, ctx)
    except Exception:
        return None  # no calibration rather than a lost case


def _decide(bench: Bench, ref: BaselineRef, ctx: Any, lock: Lock, hardware: str) -> None:
    pf, session = bench.session.preflight, bench.session
    pf.stored = ref.calibration
    if pf.stored is None:
        return  # a file stored before calibrations (or by another probe): case by case
    with lock():
        pf.now = _probe(bench, ctx)
    if pf.holds:
        return
    sha = ref.sha
    pf.why_not = session.why_no_pair(sha)
    label = sha[:10]
    lead = (
        f"mxperf: the stored baselines (commit {label}) do not hold on this machine: it runs "
        f"the calibration probe at {pf.factor:.2f}x their machine's speed (beyond "
        f"{THRESHOLD:.2f}x)"
    )
    # The software is not known before a case: with --mxperf-env-command, pair anyway.
    if pf.why_not is None and session.nothing_to_pair(sha, software_changed=True):
        pf.why_not = f"the code is the baseline commit {label}'s: only baseline files differ"
        bench.tell(
            f"{lead}; {pf.why_not}, so no paired run is needed: a case off its stored figure "
            "is the machine's, unless the software changed"
        )
    if pf.why_not is not None:
        return
    _pair_rest(bench, sha, lead, hardware)


def _remaining(bench: Bench) -> tuple[str, ...]:
    """The node ids of this case's test and every benchmark after it in the run."""
    items = bench.item.session.items
    start = items.index(bench.item) if bench.item in items else 0
    return tuple(i.nodeid for i in items[start:] if is_benchmark(i))


def _pair_on_evidence(bench: Bench, sha: str, hardware: str) -> None:
    """The joint pair started by the run's own cases (`note_arbitrated`)."""
    pf = bench.session.preflight
    tests = {*_remaining(bench), *(u.nodeid for u in _undecided(bench, sha))}
    if len(tests) < EVIDENCE:
        return  # one test left: its own pair, if suspected, costs no more
    changes = ", ".join(f"{c:+.1%}" for c in pf.off[sha])
    lead = (
        f"mxperf: {len(pf.off[sha])} cases measured below their stored figures ({changes}) "
        f"and their own paired runs found the code no slower than the baseline commit "
        f"{sha[:10]}'s: the machine, not the code"
    )
    _pair_rest(bench, sha, lead, hardware)


def _pair_rest(bench: Bench, sha: str, lead: str, hardware: str) -> None:
    """One paired run of ``sha`` and HEAD over this case's test and every benchmark after it,
    and the earlier tests whose cases their own pairs of ``sha`` left inconclusive (their
    rounds counted as its first), said on the terminal with ``lead`` first (``hardware``: the
    key whose stored thresholds its rounds may aim at, `MxperfSession.clears`)."""
    pf, session = bench.session.preflight, bench.session
    label = sha[:10]
    undecided = _undecided(bench, sha)
    pf.nodeids = tuple(dict.fromkeys([u.nodeid for u in undecided] + list(_remaining(bench))))
    again = (
        f" ({len(undecided)} of them again, left inconclusive by their own pairs)"
        if undecided
        else ""
    )
    bench.tell(
        f"{lead}; {len(pf.nodeids)} benchmark(s){again} are measured in one paired run of "
        f"{label} and HEAD here, and judged by it"
    )
    try:
        pf.data = session.pairer.run(
            label,
            sha,
            list(pf.nodeids),
            lambda text: bench.tell(f"mxperf: preflight: {text}"),
            clears=session.clears(hardware),
            earlier={u.key: u.rounds for u in undecided},
            handed=_judged(bench, undecided),
        )
        pf.sha = sha
    except PairSetupError as exc:
        pf.why_not = str(exc)
        bench.tell(f"mxperf: no paired run of {label} ({exc}); each case is judged alone")
        return
    for case in undecided:
        _judge_again(bench, case, pf.data)


def _judged(bench: Bench, undecided: Sequence[Undecided]) -> list[CaseResult]:
    """The cases of the joint pair's tests judged already, handed back to its sides, not timed:
    this test's cases before this one, and the other cases of the earlier tests it measures
    again for their ``undecided`` ones."""
    again = {u.nodeid for u in undecided}
    keys = {u.key for u in undecided}
    earlier = [
        r for r in bench.session.collected.results if r.nodeid in again and r.key not in keys
    ]
    return [*bench.results, *earlier]


def _undecided(bench: Bench, sha: str) -> list[Undecided]:
    """The cases of earlier tests their own pairs of ``sha`` left inconclusive (one of this
    test, whose results are not kept yet, is not judged again: its own pair measured it and every
    case after it in the test, and the joint pair of this test alone would be that pair again)."""
    return [
        u
        for u in bench.session.preflight.undecided
        if u.sha == sha and u.nodeid != bench.item.nodeid
    ]


def _judge_again(bench: Bench, case: Undecided, data: PairedData) -> None:
    """Judge an earlier case again once the joint pair ``data`` measured it: its result (as
    the run's table, JSON and summary show it) is the new one, its verdict saying how it was
    judged, and is said on the terminal. Its test has passed (inconclusive); a regression found
    now fails the run at its end, as an error that names the case."""
    session = bench.session
    joint = len(data.pairs(case.key)) - len(case.rounds)
    rounds = f"{len(case.rounds)} round(s) of its own pair and {joint} of the joint pair's"
    note = Finding(
        "judged again by the run's joint pair, which measured it after its own pair had left "
        f"it inconclusive: {rounds}"
    )
    try:
        result = case.again(note)
    except Exception as exc:  # the earlier verdict stands; never a lost run
        bench.tell(f"mxperf: {case.key}: not judged again ({type(exc).__name__}: {exc})")
        return
    verdict = result.verdict
    if verdict is None:
        return
    session.collected.replace(result)
    outcome = verdict.outcome.value
    session.preflight.judged_again[case.key] = outcome
    bench.tell(f"mxperf: {case.key}: {outcome} when judged again with the joint pair ({rounds})")
    if verdict.failed:
        session.errors.append(
            f"{case.key}: {outcome}: the run's joint pair measured it again after its own pair "
            f"had left it inconclusive ({rounds}); its test {case.nodeid} had passed; the "
            "verdict is in the results table and the JSON report"
        )
