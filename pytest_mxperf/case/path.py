"""The case path under every ``mxperf`` method: key, skip, claim, device lock, measure, judge,
and the paired arbitration of a suspected regression (`CaseBench`; the public methods are on
`pytest_mxperf.case.fixture.MxPerf`, measuring and judging against the stored baseline in
`pytest_mxperf.case.stored`)."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_mxperf.case import stored
from pytest_mxperf.case.bench import Bench, Runner
from pytest_mxperf.case.roles import CaseRole, Finds, Measure
from pytest_mxperf.config.casekey import CaseKey, CaseKeyError
from pytest_mxperf.config.markers import MarkerSpec
from pytest_mxperf.measuring.protocol import Backend, PrepareSpec
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.run.session import MxperfSession
from pytest_mxperf.system import fingerprint

#: A case that ends so has no figure to give its caller: its test fails at the call.
FAILED_AT_CALL = (Status.ERROR, Status.NAN)


def check_positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


class CaseBench(Bench):
    """The path one case takes, on one test's `Bench`; `MxPerf` adds the methods a test calls,
    `sweeps`, `dataparallel` and `pipelines` (of this wing) the bigger ones."""

    def __init__(
        self,
        *,
        item: pytest.Item,
        session: MxperfSession,
        backend: Backend,
        marker: MarkerSpec,
        default_ctx: Any,
        role: CaseRole,
    ) -> None:
        super().__init__(
            item=item, session=session, backend=backend, marker=marker, default_ctx=default_ctx
        )
        #: What this process does with a case: the run's, chosen at configure time.
        self.role = role

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
        finds: Finds | None = None,
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
        joint = self.role.joint(self, result, ctx, lock)
        step = stored.PlainStep(self, net, spec, runner, ctx, joint, wide)
        return self.through(result, [(kind, index)], step, finds, alone=alone)

    def through(
        self,
        result: CaseResult,
        devices: Sequence[tuple[str, int]],
        measure: Measure,
        finds: Finds | None = None,
        *,
        alone: bool = False,
    ) -> CaseResult:
        """The rest of every case's path once its ``result`` exists (key claimed): this run's
        role measures it with ``measure`` inside the locks of ``devices`` ((kind, index) each)
        and judges it as it judges (`roles`), with what the method ``finds`` in its figures;
        then the case kept and its warnings said. ``alone``: in a lock-step side, the whole of
        ``measure`` is one turn of the baton (a data-parallel launch, whose ranks the baton
        cannot reach; an input pipeline, whose loader threads and workers would refill their
        prefetch queues during the other side's blocks: work beside a timed block, and batches
        ready for free at the start of the side's next one)."""
        result = self.role.settle(self, result, devices, measure, finds, alone)
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
        if key in self._seen:
            pytest.fail(
                f"mxperf: case key {str(key)!r} is measured twice in this run (first by "
                f"{self._seen[key]}); pass name= to tell the cases apart",
                pytrace=False,
            )
        self._seen[key] = self.item.nodeid
