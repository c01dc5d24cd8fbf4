"""The rounds of a paired run: REV's and HEAD's sides measured in alternating order, round after
round, until every case is decided or the rounds run out; lock-step sides run together, taking
turns through the controller's conductor on a local socket."""

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

from pytest_mxperf.config import side as side_flags
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.paired import turns
from pytest_mxperf.paired.forkserver import ForkServer, ForkServerError
from pytest_mxperf.paired.pairdata import (
    HEAD,
    REV,
    PairedData,
    SideResult,
    block_plan,
)
from pytest_mxperf.paired.sides import (
    SideSpec,
    read_side,
    side_args,
    side_command,
    side_env,
    write_plan,
)
from pytest_mxperf.system import cpus as cpu_sets
from pytest_mxperf.system import procgroup, scratch


def run_rounds(
    data: PairedData,
    sides_: dict[str, SideSpec],
    settings: Settings,
    nodeids: Sequence[str],
    rounds: int,
    progress: Callable[[str], None] = lambda _: None,
    timeout: float = 3600.0,
    profile: bool = False,
    server: Callable[[str], ForkServer | None] = lambda _: None,
    hold: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
    overlap: bool = False,
) -> None:
    """Add ``rounds`` rounds to ``data``: REV first on even rounds, HEAD first on odd ones, each
    side one process serving every node id of the round.

    With ``profile`` the sides also profile every case after measuring it
    (``--mxperf-side-profile``) and the round goes to ``data.profile_rounds``, not to the
    evidence. With ``--mxperf-profile`` (every case's trace asked for) the first round profiles
    instead, and its HEAD side writes the traces.

    ``server`` gives the fork server that starts a side (None: each side is a fresh process
    of its ``python``). With ``settings.pair_lockstep`` both sides of a measuring round run at once
    and take turns (`pytest_mxperf.paired.turns`; profiling rounds run one side after the other),
    the controller inside ``hold()`` for the round: the session's device locks (the CPU's and
    every GPU's the run sees), so no other run measures on them meanwhile. With ``overlap`` the
    sides of such a round do their untimed work at once (`turns.Conductor`)."""
    with scratch.directory("pair", _round_tmp()) as tmp:
        select = Path(tmp) / "select.txt"

        def commands_for(ids: Sequence[str]) -> list[tuple[str, SideSpec, list[str] | None, Path]]:
            select.write_text("\n".join(ids) + "\n", encoding="utf-8")
            files = sorted({n.split("::")[0] for n in ids})
            commands = []
            for name in (REV, HEAD):
                side = sides_[name]
                present = [f for f in files if (side.rootdir / f).exists()]
                out = Path(tmp) / f"{name}.json"
                argv = side_args(side, settings, present, out, select) if present else None
                commands.append((name, side, argv, out))
            return commands

        todo = list(nodeids)
        commands = commands_for(todo)
        for _ in range(rounds):
            index = len(data.rounds)
            traces = bool(settings.profile) and index == 0 and not profile
            order = commands if index % 2 == 0 else commands[::-1]
            plan, with_plan, plan_path = block_plan(data), [], Path(tmp) / "plan.json"
            if plan:  # both sides time the same steps per block as in their first round
                write_plan(plan_path, plan)
                with_plan = [side_flags.PLAN, str(plan_path)]
            order = [
                (n, side, None if a is None else [*a, *with_plan], out) for n, side, a, out in order
            ]
            this: dict[str, SideResult] = {}
            finished: dict[str, procgroup.Finished] = {}
            #: Whether each side's process ended as pytest does and wrote its results.
            ended: dict[str, bool] = {}
            together = (
                settings.pair_lockstep
                and not (profile or traces)
                and all(argv is not None for _, _, argv, _ in order)
            )
            what = "profile" if profile else f"round {index + 1}"
            if together:
                for name, _, _, out in order:  # both start now, and take turns
                    progress(f"{what}, {data.side_label(name)}")
                    out.unlink(missing_ok=True)
                both = [(n, side, argv, out) for n, side, argv, out in order if argv is not None]
                finished = _run_together(
                    both, server, timeout, nodeids, Path(tmp), hold, overlap=overlap
                )
            for name, side, argv, out in order:
                if argv is None:
                    this[name] = SideResult()  # none of the files exists on that side
                    ended[name] = True
                    continue
                if name in finished:
                    done = finished[name]
                else:
                    progress(f"{what}, {data.side_label(name)}")
                    out.unlink(missing_ok=True)
                    if profile or traces:
                        argv = [*argv, side_flags.PROFILE]
                        if name == HEAD and settings.profile:
                            argv += ["--mxperf-profile", str(Path(settings.profile).resolve())]
                    done = _run_side(side, argv, server(name), timeout)
                this[name] = side_outcome(read_side(out), done, timeout)
                # pytest's own endings (0, 1: a test failed) with the side's results written.
                ended[name] = this[name].error is None and done.returncode in (0, 1)
                ended[name] = ended[name] and not done.timed_out
            (data.profile_rounds if profile else data.rounds).append(this)
            if profile or traces:
                continue
            # What REV has nothing to pair with (no such test there, or a file it cannot
            # collect) is measured once at HEAD, not once a round.
            alone = unpaired(data, todo) if ended.get(REV) and ended.get(HEAD) else set()
            if alone:
                todo = [n for n in todo if n not in alone]
                if not todo:
                    break
                commands = commands_for(todo)


def unpaired(data: PairedData, nodeids: Sequence[str]) -> set[str]:
    """Node ids whose cases HEAD's side measured in the last round while REV's side, in every
    round so far, had none of them: more rounds pair nothing for them."""
    last = data.rounds[-1]
    rev_keys = {k for r in data.rounds for k in r[REV].cases}
    by_node: dict[str, set[str]] = {}
    for key, case in last[HEAD].cases.items():
        by_node.setdefault(case.nodeid, set()).add(key)
    return {n for n in nodeids if n in by_node and not by_node[n] & rev_keys}


#: Lines of a failed side's output its cases' messages show.
SIDE_TAIL_LINES = 15


def side_outcome(result: SideResult, done: procgroup.Finished, timeout: float) -> SideResult:
    """``result`` as read from a side's file, with why it has nothing when the process failed
    to start or died (no file, or killed before a case): how it ended and the last lines of
    its output (a missing module in REV's environment, a crash), not only "no results"."""
    # pytest exits 1 when a test failed: the side's JSON still holds its cases.
    failed = done.timed_out or done.returncode not in (0, 1)
    if result.cases or not (failed or result.error):
        return result
    how = done.describe(timeout)
    text = f"the side process {how} and wrote no results"
    tail = done.tail.rstrip().splitlines()[-SIDE_TAIL_LINES:]
    if tail:
        text += "; the last lines of its output:\n" + "\n".join(tail)
    result.error = text
    return result


#: The longest path a Unix socket may bind (108 bytes on Linux, 104 on macOS).
_SOCKET_PATH_MAX = 104


def _round_tmp() -> str | None:
    """Where a round's temporary directory goes: the usual place, unless a lock-step socket
    in it (``<tmp>/pytest-mxperf-<uid>/scratch/mxperf-pair-<pid>-XXXXXXXX/turns.sock``) would
    be too long a path to bind (a deep TMPDIR), then under ``/tmp``."""
    usual = scratch.root()
    tail = f"/mxperf-pair-{os.getpid()}-XXXXXXXX/turns.sock"
    fits = len(os.fsencode(str(usual))) + len(tail) < _SOCKET_PATH_MAX
    return None if fits or not Path("/tmp").is_dir() else "/tmp"


def _run_side(
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


def _run_together(
    order: Sequence[tuple[str, SideSpec, list[str], Path]],
    server: Callable[[str], ForkServer | None],
    timeout: float,
    nodeids: Sequence[str],
    tmp: Path,
    hold: Callable[[], contextlib.AbstractContextManager[None]],
    overlap: bool = False,
) -> dict[str, procgroup.Finished]:
    """Both sides of a round at once, taking turns through a `turns.Conductor` on a Unix socket
    in ``tmp``; each side a thread-run process as `_run_side` runs it, this process inside
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
            args = [*argv, side_flags.TURNS, str(side_flags.Turns(name, path))]
            if overlap and side.spread:
                args += [side_flags.SPREAD, cpu_sets.describe(side.spread)]
            finished[name] = _run_side(side, args, servers[name], timeout, cancelled)
        except BaseException as exc:  # re-raised by the controller's thread
            errors.append(exc)

    threads = [
        threading.Thread(target=body, args=(name, side, argv), daemon=True)
        for name, side, argv, _ in order
    ]
    conns: dict[socket.socket, str] = {}
    pending: list[socket.socket] = []
    buffers: dict[socket.socket, bytes] = {}
    try:
        with hold():
            for t in threads:
                t.start()
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
        if any(t.is_alive() for t in threads):
            cancelled.set()
            for srv in servers.values():
                if srv is not None:
                    srv.close()  # ends its running child
        for t in threads:
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
