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

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the measured cases and collection errors where the controller reads them."""
        if self.session.is_worker:
            return
        write_side(self.orders.out, self.session.collected.results, self.session.collect_errors)
