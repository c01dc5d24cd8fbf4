"""The hooks of a paired run's side process (`SideHooks`): what only a side does in pytest,
carrying out its `SideOrders` (the node ids it runs, the results file it writes at the end)."""

from __future__ import annotations

import pytest

from pytest_mxperf.config.sideorders import SideOrders
from pytest_mxperf.paired.sides import write_side
from pytest_mxperf.run.session import MxperfSession


class SideHooks:
    """Registered beside `SessionHooks` in a side process only (``session.side`` is ``orders``):
    it runs the node ids it was given and writes what it measured for the controller, which
    judges (the side's own session end stores, writes and judges nothing)."""

    def __init__(self, session: MxperfSession, orders: SideOrders) -> None:
        self.session = session
        self.orders = orders
        #: Node id -> ``ExceptionType: message`` of each test that failed here.
        self.test_errors: dict[str, str] = {}

    @pytest.hookimpl(trylast=True)  # after the plugin's own (markers parsed on every item)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Keep exactly the node ids the paired run asked for; ids missing at this revision
        simply produce no case (its verdict says "new")."""
        if self.orders.select is None:
            return
        wanted = set(self.orders.select.read_text(encoding="utf-8").split("\n"))
        keep = [item for item in items if item.nodeid in wanted]
        dropped = [item for item in items if item.nodeid not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep why a test failed: one that raised before measuring its case leaves no case,
        and the controller must say it is this side's error, not a case missing here."""
        if report.failed and report.when in ("setup", "call"):
            self.test_errors.setdefault(report.nodeid, raised(report))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the measured cases, collection errors and test failures where the controller
        reads them."""
        if self.session.is_worker:
            return
        reused = self.session.reused  # earlier results handed back: not measured now
        write_side(
            self.orders.out,
            [c for c in self.session.collected.results if c.key not in reused],
            self.session.collect_errors,
            self.test_errors,
        )


#: The longest exception message a side passes on for one test.
RAISED_CHARS = 1000


def raised(report: pytest.TestReport) -> str:
    """``ExceptionType: message`` of a failed test (its last line of output when pytest has
    no crash line), clipped to `RAISED_CHARS`; "(in its set-up)" when a fixture failed."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        text = str(crash.message)
    else:
        lines = report.longreprtext.strip().splitlines()
        text = lines[-1] if lines else "failed"
    text = text if len(text) <= RAISED_CHARS else text[: RAISED_CHARS - 3] + "..."
    return f"{text} (in its set-up)" if report.when == "setup" else text
