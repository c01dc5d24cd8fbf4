"""The hook classes the plugin registers: an enabled run's hooks (each delegates to the
`MxperfSession` in ``config.stash``), the ``-v`` progress lines, and pytest-xdist's hooks; and
the stash keys they share with `pytest_mxperf.plugin`."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mxperf.config.markers import MarkerSpec, is_benchmark
from pytest_mxperf.judging.explain import clip_lines
from pytest_mxperf.measuring import seeding
from pytest_mxperf.paired import pairdata
from pytest_mxperf.paired.pairing import PairSetupError
from pytest_mxperf.reporting.progress import Progress
from pytest_mxperf.run.session import PROPERTY, MxperfSession
from pytest_mxperf.system import codec

if TYPE_CHECKING:
    from pytest_mxperf.case.fixture import MxPerf  # noqa: F401 (the BENCH_KEY annotation)
    from pytest_mxperf.case.roles import CaseRole  # noqa: F401 (the ROLE_KEY annotation)


class SessionHooks:
    """Hooks of an enabled run; each delegates to the `MxperfSession` in ``config.stash``."""

    def __init__(self, config: pytest.Config, session: MxperfSession) -> None:
        self.config = config
        self.session = session
        session.tell = self.tell
        #: Every plugin's ``pytest_collection_modifyitems`` ran (``-k``, ``-m`` applied).
        self.selected = False

    def tell(self, text: str) -> None:
        """One line on the terminal now, whatever the capture (stderr where there is no
        terminal reporter)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            print(text, file=sys.__stderr__, flush=True)
            return
        with contextlib.ExitStack() as stack:
            if capture is not None:
                stack.enter_context(capture.global_and_fixture_disabled())
            reporter.ensure_newline()
            reporter.write_line(text, yellow=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Seed the random generators before a benchmark's fixtures run (``--mxperf-seed``)."""
        base = self.session.settings.seed
        if base is not None and is_benchmark(item):
            seeding.seed_generators(seeding.seed_for(base, item.nodeid))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """Put each case on the report, then fail the test for a regression (after its body)."""
        bench = item.stash.get(BENCH_KEY, None)
        results = [] if bench is None else bench.results
        try:
            outcome = yield
        except BaseException:
            self.session.failures(results, item.user_properties)
            raise
        failures = self.session.failures(results, item.user_properties)
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        return outcome

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the controller for worker reports too: one code path with and without xdist.
        if report.when == "call" and not self.session.is_worker:
            self.session.collect(report.user_properties)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """``--mxperf-ab``: the sides' fork servers import MXNet while the tests are collected."""
        if self.session.settings.ab and not self.session.is_worker:  # as collection_finish
            self.session.pairer.start_servers()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self) -> None:
        self.selected = True

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """``--mxperf-ab``: measure both sides of every selected benchmark before the tests
        run; each test then judges its cases from the pairs. Not when the selection failed:
        pytest calls this hook even after an error in ``pytest_collection_modifyitems`` (a
        bad ``-k`` or ``-m`` expression), with every collected test still in
        ``session.items``, and reports the error only after it."""
        if not self.session.settings.ab or self.session.is_worker or not self.selected:
            return
        nodeids = [item.nodeid for item in session.items if is_benchmark(item)]
        if not nodeids or self.config.option.collectonly:
            return
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if session.testsfailed and not self.config.option.continue_on_collection_errors:
            # pytest stops after collection errors: rounds measured now would be discarded.
            if tr is not None:
                tr.write_line(
                    f"mxperf: paired run vs {self.session.settings.ab} not started: "
                    f"{session.testsfailed} error(s) during collection"
                )
            return
        s = self.session.settings
        # Each round runs two side processes; more rounds may follow for undecided cases.
        meter = Progress(2 * s.rounds)

        def progress(text: str) -> None:
            if meter.total is not None and meter.done >= meter.total:
                meter.total = None
            more = (
                ""
                if meter.total
                else f" (undecided cases: up to {s.max_rounds} rounds; slower ones: a profile)"
            )
            if tr is not None:
                tr.write_line(
                    f"mxperf: paired run vs {s.ab}: {text}; sides {meter.describe()}{more}"
                )
            meter.advance()

        try:
            self.session.run_ab(nodeids, progress)
        except PairSetupError as exc:
            # REV's worktree or environment cannot be made: nothing can be paired.
            raise pytest.UsageError(f"mxperf: --mxperf-ab {s.ab}: {exc}") from None
        data = self.session.paired
        for nodeid, text in [] if data is None else data.collect_problems(pairdata.REV):
            # Its cases pass as "new": said here, not only in the JSON report.
            self.tell(
                f"mxperf: paired run vs {s.ab}: {s.ab}'s side could not collect "
                f"{nodeid or 'the tests'}; its cases there are new:\n{clip_lines(text)}"
            )

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.session.collect_error(report.nodeid, report.longreprtext)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return self.session.header(numprocesses(config))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the JSON report and baselines: on the controller only, once."""
        if self.session.is_worker:
            # Tells the controller this worker finished (a crashed one sends nothing).
            session.config.workeroutput["mxperf"] = {"finished": True}  # type: ignore[attr-defined]
            return
        if self.session.side is not None:
            return  # a side judges nothing: `SideHooks` writes its results for the controller
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        if self.session.finish(interrupted) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if self.session.is_worker:
            return
        width = config.get_terminal_writer().fullwidth
        quiet = config.get_verbosity() < -1  # -qq: errors only, never nothing
        for kind, text, markup in self.session.summary(width, errors_only=quiet):
            if kind == "sep":
                terminalreporter.write_sep("=" if markup else "-", text, **markup)
            else:
                terminalreporter.write_line(text, **markup)


class ProgressHooks:
    """``-v`` runs: after each benchmark test, a line naming its cases with the count, the
    elapsed and the expected time (controller only, after pytest's own line for the test)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.meter = Progress()
        #: Node ids of the benchmarks (unknown on an xdist controller, which collects nothing).
        self.benchmarks: set[str] = set()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.benchmarks = {item.nodeid for item in session.items if is_benchmark(item)}
        self.meter.total = len(self.benchmarks) or None

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        keys = [
            str(value.get("key"))
            for name, value in report.user_properties
            if name == PROPERTY and isinstance(value, dict)
        ]
        if report.when == "call" and keys:
            self.meter.advance()
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                tr.write_line(f"mxperf: measured {', '.join(keys)} ({self.meter.describe()})")
        elif report.nodeid in self.benchmarks and report.skipped:
            self.meter.advance()  # skipped (e.g. no GPU): no line, but one fewer to wait for


def numprocesses(config: pytest.Config) -> int:
    value = getattr(config.option, "numprocesses", None)
    return value if isinstance(value, int) else 0


STATE_KEY = pytest.StashKey[MxperfSession]()
MARKER_KEY = pytest.StashKey[MarkerSpec]()
BENCH_KEY = pytest.StashKey["MxPerf"]()
#: What this process does with each case (`pytest_mxperf.case.roles`), chosen at configure time.
ROLE_KEY = pytest.StashKey["CaseRole"]()


class XdistHooks:
    """Registered only when pytest-xdist is present: run facts to workers, crash notes back."""

    def pytest_configure_node(self, node: Any) -> None:
        state = node.config.stash.get(STATE_KEY, None)
        if state is not None:
            node.workerinput["mxperf"] = {
                "settings": codec.to_dict(state.settings),
                "run": codec.to_dict(state.run),
            }

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        state = node.config.stash.get(STATE_KEY, None)
        if state is None:
            return
        out = getattr(node, "workeroutput", None) or {}  # absent when the worker crashed
        if error is not None or "mxperf" not in out:
            wid = getattr(getattr(node, "gateway", None), "id", "?")
            state.collected.crashed.append(f"{wid}: {error or 'no results sent'}")
