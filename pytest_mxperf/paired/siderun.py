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
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(2)
    conductor = turns.Conductor((order[0][0], order[1][0]), nodeids, overlap=overlap)
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
    conns: dict[socket.socket, str] = {}
    pending: list[socket.socket] = []
    buffers: dict[socket.socket, bytes] = {}
    try:
        with hold():
            for t in threads:
                t.start()
                started.append(t)
            deadline = time.monotonic() + timeout + _TOGETHER_GRACE
            while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
                readable, _, _ = select.select([listener, *pending, *conns], [], [], 0.05)
                for sock in readable:
                    if sock is listener:
                        pending.append(listener.accept()[0])
                        continue
                    chunk = sock.recv(65536)
                    lines, buffers[sock] = _lines(buffers.get(sock, b"") + chunk)
                    name = conns.get(sock)
                    for line in lines:
                        message = json.loads(line)
                        if name is None:  # the first line names the side
                            name = str(message.get("hello"))
                            conns[sock] = name
                            pending.remove(sock)
                        _send(conns, conductor.event(name, message))
                    if not chunk:
                        if name is not None:
                            del conns[sock]
                            _send(conns, conductor.event(name, None))
                        elif sock in pending:
                            pending.remove(sock)
                        sock.close()
                # A side that ended without saying goodbye (or never connected) is gone.
                for (name, *_), t in zip(order, threads):
                    if not t.is_alive() and conductor.sides[name].state != "gone":
                        _send(conns, conductor.event(name, None))
    except BaseException:
        cancelled.set()
        raise
    finally:
        for sock in [*conns, *pending, listener]:
            sock.close()  # a side waiting for its turn reads EOF and ends
        if any(t.is_alive() for t in started):
            cancelled.set()
            for srv in servers.values():
                if srv is not None:
                    srv.close()  # ends its running child
        for t in started:
            t.join()
        path.unlink(missing_ok=True)
    if errors:
        raise errors[0]
    return finished


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
