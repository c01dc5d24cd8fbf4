"""What this process does with a case once its result exists, chosen once per run (at configure
time: `pytest_mxperf.plugin.configure.role_for`) as pytest-xdist keeps its worker apart from
its controller:

- `StoredJudge`: measure here and judge against the stored baseline, a suspected regression
  arbitrated by a paired run (a plain run, its xdist workers, ``--mxperf-update``);
- `PairJudge`: ``--mxperf-ab``'s controller, which measures nothing: the sides measured every
  case before the tests ran, and it judges the pair;
- `Side`: a paired run's side process, which measures and reports figures; it never looks up
  a baseline nor builds a verdict (the controller judges).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case import evidence, jointpair, pairs, stored
from pytest_mxperf.case.bench import Bench
from pytest_mxperf.case.stored import Judging, Tries
from pytest_mxperf.config.sideorders import SideOrders
from pytest_mxperf.judging.decisions import suspected
from pytest_mxperf.measuring.measure import Measurement, for_side
from pytest_mxperf.measuring.records import CaseResult, Verdict
from pytest_mxperf.measuring.verdicts import Finding, Judged
from pytest_mxperf.paired.pairdata import PairedData
from pytest_mxperf.paired.sides import disturbed


class Measure(Protocol):
    """A case's measuring step (a plain case's `stored.PlainStep`, a data-parallel one's):
    called, the record with its figures, measured as the role's `Tries` say (``judging``: the
    stored judge's, which an attempt may be decided with; a side passes None); `judge`, the
    verdict of those figures as far as the stored baseline gives it."""

    def __call__(self, result: CaseResult, judging: Judging | None, tries: Tries) -> CaseResult:
        """The record of ``result``'s case with its figures."""

    def judge(self, measured: CaseResult, judging: Judging, tries: Tries) -> Judged:
        """The decision on the ``measured`` case and its message."""


#: What a method finds in a case's figures beside its verdict: a part the verdict is built with.
Finds = evidence.Finds
Lock = jointpair.Lock


class CaseRole(Protocol):
    """What a process does with each case (one role per run, chosen at configure time)."""

    def joint(self, bench: Bench, result: CaseResult, ctx: Any, lock: Lock) -> PairedData | None:
        """The run's joint pair that already measured this case (None: measure it here)."""

    def tries(
        self, bench: Bench, result: CaseResult, judging: Judging | None, alone: bool
    ) -> Tries:
        """How a case is tried in this process (timing, attempts, profile, peak)."""

    def settle(
        self,
        bench: Bench,
        result: CaseResult,
        devices: Sequence[tuple[str, int]],
        measure: Measure,
        finds: Finds | None,
        alone: bool,
    ) -> CaseResult:
        """The case measured (``measure``, inside the locks of ``devices``) and judged as this
        role judges, its verdict built with what the method ``finds`` in its figures (see
        `CaseBench.through`)."""


class StoredJudge:
    """Measure here, judge against the stored baseline, arbitrate a suspected regression."""

    def joint(self, bench: Bench, result: CaseResult, ctx: Any, lock: Lock) -> PairedData | None:
        return jointpair.joint_pair(bench, result, ctx, lock)

    def tries(
        self, bench: Bench, result: CaseResult, judging: Judging | None, alone: bool
    ) -> Tries:
        assert judging is not None, "the stored judge judges every case it measures"
        return stored.judged_tries(bench, result, judging, alone)

    def settle(
        self,
        bench: Bench,
        result: CaseResult,
        devices: Sequence[tuple[str, int]],
        measure: Measure,
        finds: Finds | None,
        alone: bool,
    ) -> CaseResult:
        with bench.device_locks(result.key, devices):
            start = time.time()
            judging = stored.judging_for(bench, result)
            tries = self.tries(bench, result, judging, alone)
            measured = measure(result, judging, tries)
            judged = measure.judge(measured, judging, tries)
            window = [start, time.time()]
        ref, found = judging[0], evidence.found_in(finds, measured)
        sha = "" if ref is None else ref.sha
        pf, tolerance = bench.session.preflight, bench.settings.tolerance
        machine = pf.hour(sha, judged.decision.change)
        if suspected(judged.decision, tolerance, machine, pf.explained(sha, tolerance)):
            # outside the locks: the sides take them; the pair arbitrates the stored verdict
            stored_verdict = judged.verdict()
            arbitrated = pairs.arbitrate(bench.context(), measured, stored_verdict, ref)
            again = functools.partial(
                self._arbitrate_again, bench, measured, stored_verdict, window, ref, found
            )
            jointpair.note_arbitrated(bench, measured.key, arbitrated.verdict, sha or None, again)
            return evidence.finish_judged(bench.context(), measured, arbitrated, window, ref, found)
        ctx = bench.context()
        verdict, pending = evidence.finish_stored(ctx, measured, judged, ref, None, found)
        # The record assembled: its figures, its verdict, its window, its warnings.
        warned = [*measured.warnings, *pending]
        return replace(measured, verdict=verdict, window=window, warnings=warned)

    def _arbitrate_again(
        self,
        bench: Bench,
        measured: CaseResult,
        stored_verdict: Verdict,
        window: list[float],
        ref: BaselineRef | None,
        found: tuple[Finding, ...],
        note: Finding,
    ) -> CaseResult:
        """The ``measured`` case (``stored_verdict`` against its stored figure, measured in
        ``window``) arbitrated again, after its test, by the paired run that now holds the most
        rounds of it (a run's joint pair), and finished as `settle` finishes it (with what it
        ``found``), with the ``note`` of the judgement again last."""
        ctx = bench.context()
        arbitrated = pairs.arbitrate(ctx, measured, stored_verdict, ref)
        return evidence.finish_judged(ctx, measured, arbitrated, window, ref, (*found, note))


class PairJudge:
    """``--mxperf-ab``'s controller: the sides measured the case; judge the pair.

    The controller still runs each test body, building its model, to get its cases' keys: a
    key comes from the call's arguments (label, mode, dtype, batch, device, name), after the
    test built the model it passes; a test may hold several cases or a sweep whose points
    follow from figures; and the test's own code (a skip for a dtype the device lacks, a key
    claimed twice, assertions on the returned result) must run as in a plain run. The sides'
    results are keyed by case key and carry their node ids, but judging a node id's cases
    without its body would skip all that: behaviour would change."""

    def joint(self, bench: Bench, result: CaseResult, ctx: Any, lock: Lock) -> PairedData | None:
        return None

    def tries(
        self, bench: Bench, result: CaseResult, judging: Judging | None, alone: bool
    ) -> Tries:
        raise AssertionError("the pair's judge measures nothing")

    def settle(
        self,
        bench: Bench,
        result: CaseResult,
        devices: Sequence[tuple[str, int]],
        measure: Measure,
        finds: Finds | None,
        alone: bool,
    ) -> CaseResult:
        ctx = bench.context()
        figures, judged = pairs.judge_pair(ctx, result)
        return evidence.finish_paired(ctx, result, figures, judged, finds)


def _never(_: Measurement) -> bool:
    return False


def _always(_: Measurement) -> bool:
    return True


class Side:
    """A side of a paired run: measure each case as its orders say and report the figures (its
    `SideHooks` writes them for the controller, which judges); a case a later round does not
    measure again gets back this side's earlier result of it (`MxperfSession.reused`)."""

    def __init__(self, orders: SideOrders) -> None:
        self.orders = orders

    def joint(self, bench: Bench, result: CaseResult, ctx: Any, lock: Lock) -> PairedData | None:
        return None

    def tries(
        self, bench: Bench, result: CaseResult, judging: Judging | None, alone: bool
    ) -> Tries:
        """Shorter blocks, at the case's block plan after the first round; a case timed in a
        turn of its own is measured once more in that turn when it was `disturbed`; every case
        profiled when the orders ask (`paired.rounds.run_rounds`), no peak probed (only its
        img/s is compared)."""
        config = for_side(stored.timing_of(bench.settings), alone)
        steps = bench.session.block_plan.get(result.key)
        if steps is not None:
            config = replace(config, steps_per_block=steps)
        attempts, again = (2, disturbed) if alone else (1, _never)
        profile = _always if self.orders.profile else _never
        return Tries(config, attempts, again, profile, peak=False, alone=alone)

    def settle(
        self,
        bench: Bench,
        result: CaseResult,
        devices: Sequence[tuple[str, int]],
        measure: Measure,
        finds: Finds | None,
        alone: bool,
    ) -> CaseResult:
        # (What a method ``finds`` is a part of a verdict: a side builds none.)
        earlier = bench.session.reused.get(result.key)
        if earlier is not None:
            # A later round that does not measure this case again (it is decided, or the
            # round is for another case of its test): its earlier result, for the test's code
            # after the call; the side does not report it (`SideHooks`).
            return earlier
        with bench.device_locks(result.key, devices):
            baton = bench.session.baton
            if alone and baton is not None:
                baton.alone(bench.item.nodeid, result.key)
            start = time.time()
            result = measure(result, None, self.tries(bench, result, None, alone))  # software too
            return replace(result, window=[start, time.time()])
