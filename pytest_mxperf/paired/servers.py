"""The fork servers of a session's paired sides (`forkserver.ForkServer`, one per side): started
early so that their imports overlap the session's own work, waited for on first use, renewed for
a regression's second run, closed with the session (`pairing.Pairer`)."""

from __future__ import annotations

import contextlib

from pytest_mxperf.paired import forkserver
from pytest_mxperf.paired.forkserver import ForkServer, ForkServerError
from pytest_mxperf.paired.pairdata import HEAD, REV
from pytest_mxperf.paired.sides import side_env
from pytest_mxperf.system import cpus as cpu_sets


class SideServers:
    """Both sides' fork servers; ``cpus``: the CPUs the sides are pinned to (None: not pinned).
    Each server started is closed by ``stack``; none is started where ``enabled`` is false
    (sides in another environment, ``--mxperf-env-command``: both sides then start alike)."""

    def __init__(
        self, cpus: frozenset[int] | None, stack: contextlib.ExitStack, enabled: bool = True
    ) -> None:
        self.cpus = cpus
        self.enabled = enabled
        self._stack = stack
        self._servers: dict[str, ForkServer] = {}
        self._tried: set[str] = set()
        #: Servers started and not yet waited for, and sides whose server starts after them.
        self._starting: list[tuple[str, ForkServer]] = []
        self._later: list[str] = []

    def server(self, side: str) -> ForkServer | None:
        """The fork server of ``side``'s processes (one per side: lock-step rounds run both
        sides at once), started on first use if `start` has not started it; None where sides
        run as fresh processes: no ``fork`` here, sides in another environment, or a server
        that failed."""
        if side not in self._tried:
            self.start()
        self._settle()
        srv = self._servers.get(side)
        return srv if srv is not None and srv.alive() else None

    def start(self) -> None:
        """Start both sides' fork servers without waiting for them (`server` does), so their
        imports overlap whatever this process does meanwhile (collecting the tests): at once
        where each can import MXNet on CPUs of its own (`forkserver.import_places`), else the
        first now and the other once the first is ready."""
        if not self.enabled or not forkserver.available():
            return
        sides = [s for s in (HEAD, REV) if s not in self._tried]
        self._tried.update(sides)
        places = forkserver.import_places(self.cpus, cpu_sets.available(), len(sides))
        if places is None:  # two imports on the sides' CPUs gain nothing: one after the other
            self._later += sides[1:]
            sides, places = sides[:1], [None]
        for side, place in zip(sides, places):
            self._launch(side, place)

    def renew(self) -> None:
        """Stop both sides' fork servers: the next round starts new ones (`server`)."""
        self._settle()
        for srv in self._servers.values():
            srv.close()
        self._servers.clear()
        self._tried.clear()

    def _launch(self, side: str, place: frozenset[int] | None) -> None:
        with contextlib.suppress(ForkServerError, OSError):
            srv = ForkServer(side_env(), cpus=self.cpus, import_cpus=place, wait=False)
            self._stack.callback(srv.close)
            self._starting.append((side, srv))

    def _settle(self) -> None:
        """Wait for the servers started; then start those left for later, one at a time."""
        while self._starting or self._later:
            for side, srv in self._starting:
                with contextlib.suppress(ForkServerError, OSError):
                    srv.wait_ready()
                    self._servers[side] = srv
            self._starting.clear()
            if self._later:
                self._launch(self._later.pop(0), None)
