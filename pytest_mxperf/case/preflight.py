"""Before a run's first case: do the stored figures describe this machine? If the calibration
probe says they do not, one paired run of the stored file's commit and HEAD measures every
remaining case of the run, and each case takes its figure and its verdict from it. Where the
probe cannot tell (a file stored before calibrations, or a machine that runs the probe as fast
but the models slower), the run's own cases can: once `EVIDENCE` cases measured below their
stored figures were found no slower than the baseline commit's code by their own pairs, the
rest of the run is measured in one joint pair the same way.

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
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.config.markers import is_benchmark
from pytest_mxperf.measuring.calibrate import calibrate
from pytest_mxperf.measuring.records import CaseResult, Outcome
from pytest_mxperf.paired.pairdata import PairedData
from pytest_mxperf.paired.pairing import PairSetupError
from pytest_mxperf.run.preflight import THRESHOLD

if TYPE_CHECKING:
    from pytest_mxperf.case.path import CaseBench

#: Cases that their own pairs found off their stored figures through the machine (not slower
#: code) before the rest of a run is measured in one joint pair: one could be a case the
#: machine treats differently; two of one baseline commit, in a run that has more to measure,
#: are the machine. (On a 2-vCPU VM whose models ran 0.84x the stored figures, 13 of 15 cases
#: were paired one by one: 1.9x a plain run.)
EVIDENCE = 2


def for_update(bench: CaseBench, result: CaseResult, ctx: Any) -> CaseResult:
    """``--mxperf-update``: ``result`` with the probe measured beside the first case of each
    hardware key in this process (inside the device lock), for the stored file's calibration."""
    pf = bench.session.preflight
    if result.hardware in pf.calibrated:
        return result
    pf.calibrated.add(result.hardware)
    return replace(result, calibration=_probe(bench, ctx))


Lock = Callable[[], contextlib.AbstractContextManager[None]]


def joint_pair(bench: CaseBench, result: CaseResult, ctx: Any, lock: Lock) -> PairedData | None:
    """The joint pair that covers this case, deciding once per run whether to run it (at the
    first case with a stored baseline: the probe inside ``lock``, the device's; the pair
    outside it, as its controller takes every device's lock for its rounds)."""
    pf = bench.session.preflight
    if not pf.decided and _may_decide(bench):
        ref = bench.run.baseline_for(result.hardware, str(result.key))
        if ref is not None:
            pf.decided = True
            _decide(bench, ref, ctx, lock, result.hardware)
    elif pf.evidence_sha is not None and pf.data is None and _may_decide(bench):
        sha, pf.evidence_sha = pf.evidence_sha, None
        _pair_on_evidence(bench, sha, result.hardware)
    return pf.covers(str(result.key))


def note_arbitrated(bench: CaseBench, result: CaseResult, sha: str | None) -> None:
    """After a suspected case's own pair with commit ``sha``: count it as evidence that the
    stored figures do not hold here when it measured below its stored figure and the pair found
    the code no slower (machine, or a pass the pair confirmed); at `EVIDENCE` such cases of
    one commit the next case starts the run's joint pair (`joint_pair`)."""
    pf, verdict = bench.session.preflight, result.verdict
    if (
        not sha
        or pf.data is not None
        or pf.evidence_used
        or verdict is None
        or verdict.rounds is None  # no pair ran (same code, or none could)
        or verdict.change is None
        or verdict.change >= 0
        or verdict.outcome not in (Outcome.MACHINE, Outcome.PASS, Outcome.IMPROVED)
    ):
        return
    found = pf.off.setdefault(sha, [])
    found.append(verdict.change)
    if len(found) >= EVIDENCE:
        pf.evidence_sha, pf.evidence_used = sha, True


def _may_decide(bench: CaseBench) -> bool:
    s = bench.session
    return not (s.settings.ab or s.settings.update or s.side is not None or s.is_worker)


def _probe(bench: CaseBench, ctx: Any) -> float | None:
    try:
        return calibrate(bench.backend, ctx)
    except Exception:
        return None  # no calibration rather than a lost case


def _decide(bench: CaseBench, ref: BaselineRef, ctx: Any, lock: Lock, hardware: str) -> None:
    pf, session = bench.session.preflight, bench.session
    pf.stored = ref.calibration
    if pf.stored is None:
        return  # a file stored before calibrations (or by another probe): case by case
    with lock():
        pf.now = _probe(bench, ctx)
    if pf.holds:
        return
    sha = str(ref.commit.get("sha") or "")
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


def _remaining(bench: CaseBench) -> tuple[str, ...]:
    """The node ids of this case's test and every benchmark after it in the run."""
    items = bench.item.session.items
    start = items.index(bench.item) if bench.item in items else 0
    return tuple(i.nodeid for i in items[start:] if is_benchmark(i))


def _pair_on_evidence(bench: CaseBench, sha: str, hardware: str) -> None:
    """The joint pair started by the run's own cases (`note_arbitrated`)."""
    pf = bench.session.preflight
    if len(_remaining(bench)) < EVIDENCE:
        return  # one case left: its own pair, if suspected, costs no more
    changes = ", ".join(f"{c:+.1%}" for c in pf.off[sha])
    lead = (
        f"mxperf: {len(pf.off[sha])} cases measured below their stored figures ({changes}) "
        f"and their own paired runs found the code no slower than the baseline commit "
        f"{sha[:10]}'s: the machine, not the code"
    )
    _pair_rest(bench, sha, lead, hardware)


def _pair_rest(bench: CaseBench, sha: str, lead: str, hardware: str) -> None:
    """One paired run of ``sha`` and HEAD over this case's test and every benchmark after it,
    said on the terminal with ``lead`` first (``hardware``: the key whose stored thresholds
    its rounds may aim at, `MxperfSession.clears`)."""
    pf, session = bench.session.preflight, bench.session
    label = sha[:10]
    pf.nodeids = _remaining(bench)
    bench.tell(
        f"{lead}; {len(pf.nodeids)} benchmark(s) are measured in one paired run of {label} "
        "and HEAD here, and judged by it"
    )
    try:
        pf.data = session.pairer.run(
            label,
            sha,
            list(pf.nodeids),
            lambda text: bench.tell(f"mxperf: preflight: {text}"),
            clears=session.clears(hardware),
        )
        pf.sha = sha
    except PairSetupError as exc:
        pf.why_not = str(exc)
        bench.tell(f"mxperf: no paired run of {label} ({exc}); each case is judged alone")
