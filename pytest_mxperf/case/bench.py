"""One test's benchmark state: its item, session, back end and marker, and what every step of
the case path asks of them (`Bench`; the path itself is `pytest_mxperf.case.path.CaseBench`, and
the steps in `stored` and `jointpair` take the state alone)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Callable

import pytest

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case import evidence
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.config.markers import MarkerSpec
from pytest_mxperf.judging.decisions import Policy
from pytest_mxperf.measuring import dtype_support
from pytest_mxperf.measuring.measure import MeasureConfig, Measurement
from pytest_mxperf.measuring.protocol import Backend, PrepareSpec
from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.measuring.runner import CaseRun
from pytest_mxperf.run.session import MxperfSession
from pytest_mxperf.system import locks

#: How a case is measured: (spec, config, attempts, again) -> CaseRun; default `run_case`.
Runner = Callable[[PrepareSpec, MeasureConfig, int, Callable[[Measurement], bool]], CaseRun]


class Bench:
    """One test's benchmark state (`CaseBench` is the path a case takes on it)."""

    def __init__(
        self,
        *,
        item: pytest.Item,
        session: MxperfSession,
        backend: Backend,
        marker: MarkerSpec,
        default_ctx: Any,
    ) -> None:
        self.item = item
        self.session = session
        self.settings = session.settings
        self.run = session.run
        self.backend = backend
        self.marker = marker
        self.default_ctx = default_ctx
        self._seen = session.seen
        self.results: list[CaseResult] = []
        #: Warnings of the case being finished (memory growth, start-up), said once it is kept.
        self._pending_warnings: list[str] = []

    def unsupported(self, dtype: str, kind: str, mode: str) -> str | None:
        if dtype in ("float32", "float16") and kind == "gpu":
            return None  # nothing to ask the back end
        features = str(self.backend.software().get("mxnet_features", ""))
        return dtype_support.unsupported_dtype(
            dtype, kind, mode, flags=dtype_support.cpu_flags(), features=features
        )

    def label(self, model: str | None) -> str:
        if model:
            return model
        if self.marker.model:
            return self.marker.model
        name = getattr(self.item, "originalname", None) or self.item.name
        return name[5:] if name.startswith("test_") else name

    def tell(self, text: str) -> None:
        """One line on the terminal now, whatever the capture and verbosity (stderr in an
        xdist worker, whose terminal output the controller does not show)."""
        config = self.item.config
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or capture is None or os.environ.get("PYTEST_XDIST_WORKER"):
            print(text, file=sys.__stderr__, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.ensure_newline()
            reporter.write_line(text, yellow=True)

    def reference(self, result: CaseResult) -> tuple[BaselineRef | None, list[Expectation]]:
        """The stored baseline of ``result``'s case and the marker expectations that apply to
        it on this hardware."""
        ref = self.run.baseline_for(result.hardware, result.key)
        expectations = self.marker.matching(
            model=result.model,
            mode=result.mode,
            dtype=result.dtype,
            batch_size=result.batch_size,
            hardware=result.hardware,
        )
        return ref, expectations

    def policy(self, tolerance: float) -> Policy:
        s = self.settings
        return Policy(
            tolerance=tolerance,
            strict=s.strict,
            update=s.update,
            floor_tolerance=s.unconfirmed_tolerance,
        )

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

    @contextlib.contextmanager
    def device_locks(self, key: CaseKey, devices: Sequence[tuple[str, int]]) -> Iterator[None]:
        """`device_lock` of each of ``devices`` ((kind, index) each), held together."""
        with contextlib.ExitStack() as held:
            for kind, index in devices:
                held.enter_context(self.device_lock(key, kind, index))
            yield

    def context(self) -> evidence.CaseContext:
        """What the paired and evidence steps need of this test."""
        return evidence.CaseContext(
            session=self.session,
            nodeid=self.item.nodeid,
            path=str(self.item.path),
            policy=self.policy(0.0),
            max_memory_mb=self.marker.max_memory_mb,
            pending_warnings=self._pending_warnings,
            kept=tuple(self.results),
        )
