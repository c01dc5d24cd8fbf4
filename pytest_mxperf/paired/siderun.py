"""How a paired round's side processes run: one at a time (a fresh process or forked from its
fork server, bounded in time), or both at once in lock-step, taking turns through the
controller's conductor (`turns.Conductor`) on a Unix socket in the round's directory."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_mxperf.config import sideorders
from pytest_mxperf.paired import turns
from pytest_mxperf.paired.forkserver import ForkServer, ForkServerError
from pytest_mxperf.paired.sides import SideSpec, side_command, side_env
from pytest_mxperf.system import cpus as cpu_sets
from pytest_mxperf.system import procgroup, scratch

#: The longest path a Unix socket may bind (108 bytes on Linux, 104 on macOS).
_SOCKET_PATH_MAX = 104


def round_tmp() -> str | None:
    """Where a round's temporary directory goes: the usual place, unless a lock-step socket
    in it (``<tmp>/pytest-mxperf-<uid>/scratch/mxperf-pair-<pid>-XXXXXXXX/turns.sock``) would
    be too long a path to bind (a deep TMPDIR), then under ``/tmp``."""
    usual = scratch.root()
    tail = f"/mxperf-pair-{os.getpid()}-XXXXXXXX/turns.sock"
    fits = len(os.fsencode(str(usual))) + len(tail) < _SOCKET_PATH_MAX
    return None if fits or not Path("/tmp").is_dir() else "/tmp"


def run_side(
    side: SideSpec,
    args: list[str],
    server: ForkServer | None,
    timeout: float,
    cancelled: threading.Event | None = None,
) -> procgroup.Finished:
    """One side process, bounded; with ``cancelled`` (a side run from a thread) it ends as soon
    as that is set, and is not restarted as a fresh process then."""
    if server is not None:
        try:
            return server.run(args, cwd=side.rootdir, timeout=timeout)
        except ForkServerError:  # a server gone wrong: a fresh process
            if cancelled is not None and cancelled.is_set():
                return procgroup.Finished(-signal.SIGINT, False, 0.0, "cancelled")

    def tick(_: float) -> None:
        if cancelled is not None and cancelled.is_set():
            raise KeyboardInterrupt

    return procgroup.run_bounded(
        side_command(side, args),
        cwd=side.rootdir,
        env=side.env or side_env(),
        timeout=timeout,
        cpus=side.cpus,
        poll=0.1,
        on_tick=tick,
    )


#: Seconds a lock-step round waits for its sides beyond their own time limit.
_TOGETHER_GRACE = 30.0


def run_together(
    order: Sequence[tuple[str, SideSpec, list[str], Path]],
    server: Callable[[str], ForkServer | None],
    timeout: float,
    nodeids: Sequence[str],
    tmp: Path,
    hold: Callable[[], contextlib.AbstractContextManager[None]],
    overlap: bool = False,
) -> dict[str, procgroup.Finished]:
    """Both sides of a round at once, taking turns through a `turns.Conductor` on a Unix socket
    in ``tmp``; each side a thread-run process as `run_side` runs it, this process inside
    ``hold()`` (the device locks; the sides take none). With ``overlap`` their untimed work may
    run at once, on each side's ``spread`` CPUs.
    Whatever ends the wait (KeyboardInterrupt included), both sides are gone when this returns
    or raises."""
    path = tmp / "turns.sock"
    path.unlink(missing_ok=True)
    conductor = turns.Conductor((order[0][0], order[1][0]), nodeids, overlap=overlap)
    board = _Switchboard(path, conductor)
    cancelled = threading.Event()
    finished: dict[str, procgroup.Finished] = {}
    errors: list[BaseException] = []
    servers = {name: server(name) for name, _, _, _ in order}

    def body(name: str, side: SideSpec, argv: list[str]) -> None:
        try:
            args = [*argv, sideorders.TURNS, str(sideorders.Turns(name, path))]
            if overlap and side.spread:
                args += [sideorders.SPREAD, cpu_sets.describe(side.spread)]
            finished[name] = run_side(side, args, servers[name], timeout, cancelled)
        except BaseException as exc:  # re-raised by the controller's thread
            errors.append(exc)

    threads = [
        threading.Thread(target=body, args=(name, side, argv), daemon=True)
        for name, side, argv, _ in order
    ]
    # The threads to join: a signal (Ctrl-C) may come in ``hold()`` or between the starts, and
    # joining a thread never started raises. (One whose start() the signal interrupted runs
    # unjoined; the fork server it runs its side from is closed when the run ends.)
    started: list[threading.Thread] = []
    try:
        with hold():
            for t in threads:
                t.start()
                started.append(t)
            board.serve([name for name, *_ in order], threads, timeout + _TOGETHER_GRACE)
    except BaseException:
        cancelled.set()
        raise
    finally:
        board.close()  # a side waiting for its turn reads EOF and ends
        _join(started, cancelled, servers)
        path.unlink(missing_ok=True)
    if errors:
        raise errors[0]
    return finished


class _Switchboard:
    """The Unix socket at ``path`` through which both sides of a lock-step round talk to the
    ``conductor``: each side's first line names it, its later lines are events, EOF is its end."""

    def __init__(self, path: Path, conductor: turns.Conductor) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(2)
        self.conductor = conductor
        self.conns: dict[socket.socket, str] = {}
        self.pending: list[socket.socket] = []
        self.buffers: dict[socket.socket, bytes] = {}

    def poll(self) -> None:
        """Whatever the sockets have for up to 50 ms: connections, lines, ends."""
        socks = [self.listener, *self.pending, *self.conns]
        readable, _, _ = select.select(socks, [], [], 0.05)
        for sock in readable:
            if sock is self.listener:
                self.pending.append(self.listener.accept()[0])
                continue
            chunk = sock.recv(65536)
            lines, self.buffers[sock] = _lines(self.buffers.get(sock, b"") + chunk)
            name = self.conns.get(sock)
            for line in lines:
                message = json.loads(line)
                if name is None:  # the first line names the side
                    name = str(message.get("hello"))
                    self.conns[sock] = name
                    self.pending.remove(sock)
                _send(self.conns, self.conductor.event(name, message))
            if not chunk:
                if name is not None:
                    del self.conns[sock]
                    _send(self.conns, self.conductor.event(name, None))
                elif sock in self.pending:
                    self.pending.remove(sock)
                sock.close()

    def serve(self, names: list[str], threads: list[threading.Thread], seconds: float) -> None:
        """Until both sides' threads end or ``seconds`` pass; a side that ended without saying
        goodbye (or never connected) is gone."""
        deadline = time.monotonic() + seconds
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            self.poll()
            for name, t in zip(names, threads):
                if not t.is_alive():
                    self.gone(name)

    def gone(self, name: str) -> None:
        """The side ``name`` has ended: the conductor hears so once."""
        if self.conductor.sides[name].state != "gone":
            _send(self.conns, self.conductor.event(name, None))

    def close(self) -> None:
        for sock in [*self.conns, *self.pending, self.listener]:
            sock.close()


def _join(
    started: list[threading.Thread],
    cancelled: threading.Event,
    servers: dict[str, ForkServer | None],
) -> None:
    """The sides' threads joined; a side still running is cancelled, its fork server closed
    (which ends its running child)."""
    if any(t.is_alive() for t in started):
        cancelled.set()
        for srv in servers.values():
            if srv is not None:
                srv.close()
    for t in started:
        t.join()


def _lines(data: bytes) -> tuple[list[bytes], bytes]:
    *lines, rest = data.split(b"\n")
    return [line for line in lines if line.strip()], rest


def _send(conns: dict[socket.socket, str], replies: list[tuple[str, str]]) -> None:
    by_name = {name: sock for sock, name in conns.items()}
    for name, reply in replies:
        sock = by_name.get(name)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.sendall((json.dumps(reply) + "\n").encode())
