"""The case path under every ``mxperf`` method: key, skip, claim, device lock, measure, judge,
and the paired arbitration of a suspected regression (`CaseBench`; the public methods are on
`pytest_mxperf.case.fixture.MxPerf`, measuring and judging against the stored baseline in
`pytest_mxperf.case.stored`)."""

from __future__ import annotations

import contextlib
import functools
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Callable, Optional

import pytest

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case import evidence, jointpair, pairs, stored
from pytest_mxperf.case.bench import Bench, Runner
from pytest_mxperf.config.casekey import CaseKey, CaseKeyError
from pytest_mxperf.judging.decisions import suspected
from pytest_mxperf.measuring.protocol import PrepareSpec
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.system import fingerprint, locks

#: A case that ends so has no figure to give its caller: its test fails at the call.
FAILED_AT_CALL = (Status.ERROR, Status.NAN)

#: A case's measuring step: its result measured and judged, and its stored baseline.
Measure = Callable[[CaseResult], tuple[CaseResult, Optional[BaselineRef]]]
#: What a method does with a case's finished result before it is kept (returns the result).
After = Callable[[CaseResult], CaseResult]


def check_positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


class CaseBench(Bench):
    """The path one case takes, on one test's `Bench`; `MxPerf` adds the methods a test calls,
    `sweeps`, `dataparallel` and `pipelines` (of this wing) the bigger ones."""

    def case(
        self,
        net: Any,
        mode: str,
        batch_size: int,
        *,
        model: str | None = None,
        name: str | None = None,
        ctx: Any = None,
        dtype: str = "float32",
        runner: Runner | None = None,
        after: After | None = None,
        alone: bool = False,
        wide: bool = False,
        **options: Any,
    ) -> CaseResult:
        check_positive("batch_size", batch_size)
        backend = self.backend
        ctx = self.default_ctx if ctx is None else ctx
        spec = PrepareSpec.from_options(
            mode=mode, batch_size=batch_size, ctx=ctx, dtype=dtype, options=options
        )
        kind, index = backend.describe(ctx)
        why_not = self.unsupported(dtype, kind, mode)
        if why_not:
            pytest.skip(why_not)
        key = self.key(model, mode, dtype, batch_size, kind, name)
        self.claim(key)
        result = CaseResult(
            key=key,
            device=f"{kind}({index})",
            hardware=self.run.hardware_for(kind, index),
            threads=fingerprint.threads_in_force(os.environ),
            environment=fingerprint.perf_environment(os.environ),
            nodeid=self.item.nodeid,
            worker=os.environ.get("PYTEST_XDIST_WORKER"),
        )
        lock = functools.partial(self.device_lock, key, kind, index)
        # A run's joint pair (decided before the lock: its controller takes every device's).
        joint = None if self.settings.ab else jointpair.joint_pair(self, result, ctx, lock)

        def measure(result: CaseResult) -> tuple[CaseResult, BaselineRef | None]:
            if self.settings.update:
                result = jointpair.for_update(self, result, ctx)
            adopted = None if joint is None else pairs.adopt_head(result, joint)
            if adopted is not None:
                return stored.judge_stored(self, adopted)  # its figure is HEAD's from the pair
            return stored.measure(self, result, net, spec, runner, alone=alone, wide=wide)

        return self.through(result, [(kind, index)], measure, after, alone=alone)

    def through(
        self,
        result: CaseResult,
        devices: Sequence[tuple[str, int]],
        measure: Measure,
        after: After | None = None,
        *,
        alone: bool = False,
    ) -> CaseResult:
        """The rest of every case's path once its ``result`` exists (key claimed): in
        ``--mxperf-ab`` mode the pair's verdict; else ``measure`` (measure and judge, returning
        the stored baseline) inside the locks of ``devices`` ((kind, index) each), a suspected
        verdict arbitrated outside them; then the evidence, ``after``, the case kept and its
        warnings said. ``alone``: in a lock-step side, the whole of ``measure`` is one turn of
        the baton (a data-parallel launch, whose ranks the baton cannot reach; an input
        pipeline, whose loader threads and workers would refill their prefetch queues during the
        other side's blocks: work beside a timed block, and batches ready for free at the start
        of the side's next one)."""
        if self.settings.ab:
            # Paired mode: the side processes measured this case; judge the pair.
            result = self._finish_pair(self.judge_pair(result))
        else:
            with contextlib.ExitStack() as held:
                for kind, index in devices:
                    held.enter_context(self.device_lock(result.key, kind, index))
                baton = self.session.baton
                if alone and baton is not None:
                    baton.alone(self.item.nodeid, str(result.key))
                start = time.time()
                result, ref = measure(result)
                result = replace(result, window=[start, time.time()])
            why_no_base: str | None = None
            machine = self.session.preflight.factor  # the probe, where it ran
            if result.verdict is not None and suspected(
                result.verdict, self.settings.tolerance, machine
            ):
                # outside the locks: the sides take them
                judged = result
                result, why_no_base = self.arbitrate(judged, ref)
                sha = None if ref is None else ref.commit.get("sha")
                again = functools.partial(self._arbitrate_again, judged, ref, after)
                jointpair.note_arbitrated(self, result, str(sha) if sha else None, again)
            result = self._finish(result, ref, why_no_base)
        if after is not None:
            result = after(result)
        self.results.append(result)
        self._warn_pending(result)
        return result

    def fail_if_errored(self, first: int) -> None:
        """Fail the test now, at the call, when a case measured since ``results[first]`` errored
        (or emitted NaN/inf): the caller's code after the call never sees a case without a
        figure (``assert result.images_per_sec > 0`` would raise a TypeError that hides the
        cause). The message lists every failed case of the test so far; the case stays on the
        report (the call hook records it)."""
        if not any(r.status in FAILED_AT_CALL for r in self.results[first:]):
            return
        messages = []
        for r in self.results:
            if r.verdict is not None and r.verdict.failed:
                messages.append("mxperf: " + r.verdict.message)
            elif r.status in FAILED_AT_CALL:
                messages.append(f"mxperf: {r.key}: {r.error or r.status.value}")
        pytest.fail("\n".join(messages), pytrace=False)

    def device_lock(
        self, key: CaseKey, kind: str, index: int
    ) -> contextlib.AbstractContextManager[None]:
        """This device's machine-wide lock; a case that has to wait for another run says so.

        None in a lock-step side of a paired run: it takes turns with the other side through
        the baton, and its controller holds the CPU lock for the round (waiting here for a lock
        the controller or the other side holds would never end)."""
        if self.session.baton is not None:
            return contextlib.nullcontext()
        device = self.run.device_lock_name(kind, index)

        def waiting(holder: str) -> None:
            self.tell(
                f"mxperf: {key}: waiting for the {device} lock: another pytest --mxperf run on "
                f"this machine is measuring ({holder}); runs take turns"
            )

        return locks.device_lock(self.run.lock_dir, device, on_wait=waiting)

    def _warn_pending(self, result: CaseResult) -> None:
        pending, self._pending_warnings = self._pending_warnings, []
        for text in pending:
            warnings.warn(f"mxperf: {result.key}: {text}", pytest.PytestWarning, stacklevel=5)

    def key(
        self,
        model: str | None,
        mode: str,
        dtype: str,
        batch_size: int,
        kind: str,
        name: str | None = None,
        world_size: int | None = None,
    ) -> CaseKey:
        """The key of a case of this test; a model label or name no key can hold fails the
        test with what is wrong, naming the test (not a traceback from inside the plugin)."""
        try:
            return CaseKey(self.label(model), mode, dtype, batch_size, kind, name, world_size)
        except CaseKeyError as exc:
            pytest.fail(f"mxperf: {self.item.nodeid}: {exc}", pytrace=False)

    def claim(self, key: CaseKey) -> None:
        """Two cases with one key in one run are an error."""
        text = str(key)
        if text in self._seen:
            pytest.fail(
                f"mxperf: case key {text!r} is measured twice in this run (first by "
                f"{self._seen[text]}); pass name= to tell the cases apart",
                pytrace=False,
            )
        self._seen[text] = self.item.nodeid

    def _context(self) -> evidence.CaseContext:
        return evidence.CaseContext(
            session=self.session,
            nodeid=self.item.nodeid,
            path=str(self.item.path),
            policy=self.policy(0.0),
            max_memory_mb=self.marker.max_memory_mb,
            pending_warnings=self._pending_warnings,
        )

    def arbitrate(
        self, result: CaseResult, ref: BaselineRef | None
    ) -> tuple[CaseResult, str | None]:
        return pairs.arbitrate(self._context(), result, ref)

    def _arbitrate_again(
        self, judged: CaseResult, ref: BaselineRef | None, after: After | None
    ) -> CaseResult:
        """The case ``judged`` against its stored figure arbitrated again, after its test, by
        the paired run that now holds the most rounds of it (a run's joint pair), and finished
        as `through` finishes it."""
        result, why_no_base = self.arbitrate(judged, ref)
        result = self._finish(result, ref, why_no_base)
        return result if after is None else after(result)

    def _finish(
        self, result: CaseResult, ref: BaselineRef | None, why_no_base: str | None
    ) -> CaseResult:
        return evidence.finish_stored(self._context(), result, ref, why_no_base)

    def _finish_pair(self, result: CaseResult) -> CaseResult:
        return evidence.finish_paired(self._context(), result)

    def judge_pair(self, result: CaseResult) -> CaseResult:
        return pairs.judge_pair(self._context(), result)
