"""A fork server for the sides of a paired run: one process imports Python, pytest, this plugin
and MXNet once; both sides' servers are forked from it (`ForkServer.twins`: the sides share
this environment and CPUs), and every side of every round is a child forked from its server.

A side of a round is still a process of its own (its own pytest session, MXNet engine state and
memory; nothing a child does reaches the next one), but it no longer pays the interpreter start
and ``import mxnet`` (about 1.3 s of a 3 s side on a 2-vCPU VM). MXNet supports being forked
after import (its engine stops and restarts its threads around ``fork``); no operator has run
in the server, so no OpenMP pool or device context is inherited.

Protocol, one JSON object per line: the controller writes ``{"args", "cwd", "log"}`` to the
server's request pipe; the server forks, answers ``{"pid"}`` on its answer pipe, and
``{"exit"}`` once the child is done. A server and each child start their own session (a pid is
its process group), so the controller kills a child and whatever it started exactly as
`procgroup.run_bounded` does, and one server without its twin. The server exits, killing a
running child, when its request pipe closes: with the controller's `ForkServer.close` or its
death; the importer exits once its servers have.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pytest_mxperf.paired.forkcode import SERVER
from pytest_mxperf.system import cpus as cpu_sets
from pytest_mxperf.system import pluginpath, procgroup, scratch

#: Modules the server imports before forking (comma-separated; empty: none; unset:
#: `default_preload`). The fake back end of this repository's own tests needs no MXNet, so its
#: pytester runs set their own list.
PRELOAD_ENV = "PYTEST_MXPERF_SIDE_PRELOAD"
DEFAULT_PRELOAD = "mxnet"
#: Seconds the server may take to start (imports included) before it is given up on.
START_TIMEOUT = 120.0


class ForkServerError(RuntimeError):
    """The server could not start or stopped answering; the side runs as a plain process."""


class _Importer:
    """The process that imports once and forks the servers that share it; it exits once they
    have all exited. Its last server's `ForkServer.close` reaps it."""

    def __init__(self, proc: subprocess.Popen[bytes], servers: int) -> None:
        self.proc = proc
        self.open = servers

    def server_closed(self) -> None:
        self.open -= 1
        if self.open == 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5.0)
            procgroup.kill_group(self.proc, 1.0)


#: A server's importer, and the pipes it takes requests from and answers on.
_Channel = tuple[_Importer, IO[bytes], IO[bytes]]


class ForkServer:
    """One server process per side of a paired run; `run` has the contract of
    `procgroup.run_bounded`. With ``cpus``, the server is pinned to them before it imports
    anything, and so is every child (MXNet sizes its thread pool from the CPUs a process may
    use). With ``import_cpus`` (as many CPUs as ``cpus``: the same thread pool), it imports
    pinned there and moves to ``cpus`` before it is ready. With ``wait`` False the server is
    started but not waited for: call `wait_ready`. `twins` starts servers that share one
    import (the sides of a pair: the same environment and CPUs)."""

    def __init__(
        self,
        env: Mapping[str, str],
        python: str = sys.executable,
        cpus: Collection[int] | None = None,
        import_cpus: Collection[int] | None = None,
        wait: bool = True,
        *,
        channel: _Channel | None = None,
    ) -> None:
        # ``channel``: a server `twins` started (its importer, request and answer pipes).
        if channel is None:
            (channel,) = _start(env, 1, python, cpus, import_cpus)
        self._importer, self._requests, self._answers = channel
        self._started = time.monotonic()
        #: The server's pid (its own process group); 0 until it is ready.
        self.pid = 0
        self._closed = False
        if wait:
            self.wait_ready()

    @classmethod
    def twins(
        cls, env: Mapping[str, str], count: int, cpus: Collection[int] | None = None
    ) -> list[ForkServer]:
        """``count`` servers forked from one process that imported once (as a fresh server
        would, in ``env`` and this process's working directory), not waited for."""
        started = _start(env, count, sys.executable, cpus, None)
        return [cls(env, cpus=cpus, wait=False, channel=channel) for channel in started]

    def wait_ready(self) -> None:
        """Wait until the server has imported what it preloads (at most `START_TIMEOUT` from
        its start; at once when it has); a server that fails to start is closed.

        :raises ForkServerError: it did not start."""
        if self.pid:
            return
        try:
            ready = self._read(START_TIMEOUT - (time.monotonic() - self._started))
        except BaseException:
            self.close()
            raise
        if "ready" not in ready:
            self.close()
            raise ForkServerError(f"unexpected first answer {ready!r}")
        self.pid = int(ready["ready"])

    def alive(self) -> bool:
        return not self._closed and self.pid > 0 and procgroup.group_alive(self.pid)

    def _read(self, timeout: float) -> dict[str, Any]:
        """The server's next answer; raises ForkServerError when it is gone or silent."""
        ready, _, _ = select.select([self._answers], [], [], max(0.0, timeout))
        if not ready:
            raise ForkServerError(f"no answer in {timeout:g} s")
        line = self._answers.readline()
        if not line:
            raise ForkServerError("the server exited")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(
        self, args: Sequence[str], *, cwd: str | Path, timeout: float, grace: float = 5.0
    ) -> procgroup.Finished:
        """Run ``pytest args`` in a child forked from the server, in ``cwd``, at most
        ``timeout`` seconds; the child's process group is gone when this returns (also when
        anything, KeyboardInterrupt included, interrupts the wait: re-raised after cleanup)."""
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout!r}")
        with scratch.directory("side") as tmp:
            log = Path(tmp) / "out.log"
            start = time.monotonic()
            request = {"args": list(args), "cwd": str(cwd), "log": str(log)}
            try:
                self._requests.write((json.dumps(request) + "\n").encode())
                self._requests.flush()
            except OSError as exc:
                raise ForkServerError(f"the server does not take requests ({exc})") from None
            pid = int(self._read(START_TIMEOUT)["pid"])
            timed_out, code = False, None
            try:
                remaining = timeout - (time.monotonic() - start)
                try:
                    code = int(self._read(remaining)["exit"])
                except ForkServerError:
                    if not self.alive():
                        raise
                    timed_out = True
            finally:
                self._kill_child(pid, grace, waited=code is not None)
            if code is None:
                code = -signal.SIGKILL
            seconds = time.monotonic() - start
            tail = procgroup.tail_text(log.read_bytes()) if log.exists() else ""
        return procgroup.Finished(code, timed_out, seconds, tail)

    def _kill_child(self, pid: int, grace: float, waited: bool) -> None:
        """End the child's group (its leader may be gone, grandchildren not), and collect the
        server's exit answer for a child killed here."""
        if procgroup.group_alive(pid):
            procgroup.end_group(pid, grace)  # the server reaps the leader
        if not waited:
            with contextlib.suppress(ForkServerError):
                self._read(grace)  # the server reaps the child and says so
        procgroup.wait_group_gone(pid)

    def close(self) -> None:
        """Stop the server: its request pipe closes, it kills a running child and exits; what
        is left of its group after a moment is killed."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._requests.close()
        if not self.pid:  # not waited for: it may have started meanwhile
            with contextlib.suppress(ForkServerError, ValueError, TypeError):
                self.pid = int(self._read(0.0).get("ready", 0))
        if self.pid:
            deadline = time.monotonic() + 5.0
            while _running(self.pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            procgroup.end_group(self.pid, 1.0)
            procgroup.wait_group_gone(self.pid)
        self._answers.close()
        self._importer.server_closed()


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (its parent, the importer, reaps it as it exits)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _start(
    env: Mapping[str, str],
    count: int,
    python: str,
    cpus: Collection[int] | None,
    import_cpus: Collection[int] | None,
) -> list[_Channel]:
    """Start the importer of ``count`` servers: each server's request and answer pipes."""
    if import_cpus is not None and (cpus is None or len(set(import_cpus)) != len(set(cpus))):
        raise ValueError("import_cpus needs cpus, and as many CPUs as they have")
    moved = import_cpus is not None and set(import_cpus) != set(cpus or ())
    code = SERVER.format(
        root=pluginpath.import_root(),
        preload_env=PRELOAD_ENV,
        # The server reads PRELOAD_ENV from ``env`` first: the default only where it is unset
        # (working it out imports the whole package and reads every distribution's entry
        # points, about 0.2 s the first time).
        default="" if PRELOAD_ENV in env else default_preload(),
        pin=sorted(cpus) if moved and cpus is not None else None,
    )
    ours, theirs = [], []
    for _ in range(count):
        (req_r, req_w), (ans_r, ans_w) = os.pipe(), os.pipe()
        # Answers unbuffered: a line read ahead into a buffer would wait for `select` in vain.
        ours.append((os.fdopen(req_w, "wb"), os.fdopen(ans_r, "rb", buffering=0)))
        theirs.append((req_r, ans_w))
    try:
        proc = subprocess.Popen(
            [python, "-c", code, json.dumps(theirs)],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=[fd for pair in theirs for fd in pair],
            preexec_fn=cpu_sets.pinning(import_cpus if moved else cpus),
        )
    except BaseException:
        for pipes in ours:
            for pipe in pipes:
                pipe.close()
        raise
    finally:
        for fd in (fd for pair in theirs for fd in pair):
            os.close(fd)
    importer = _Importer(proc, count)
    return [(importer, requests, answers) for requests, answers in ours]


def default_preload() -> str:
    """What a server imports unless `PRELOAD_ENV` says otherwise: MXNet, then what every side
    forked from it would import again for itself: GitPython (the run facts' commit detection),
    pytest's own plugins (some it imports only once a session is configured: junitxml, pdb
    and readline for debugging), the rest of this package (the side's hooks, the root conftest
    of a repository that imports it) and the pytest plugins of this environment, which pytest
    loads by their entry points in every side. All are this environment's code, the same for
    both sides (a side in REV's own environment, ``--mxperf-env-command``, has no fork server);
    the repository's own modules (conftest files, tests) are never preloaded. A module that
    fails to import is left to the side, which reports why."""
    import pkgutil
    from importlib.metadata import entry_points

    from _pytest import config as pytest_config

    import pytest_mxperf

    names = [DEFAULT_PRELOAD, "git"]
    builtin = (
        *getattr(pytest_config, "essential_plugins", ()),
        *getattr(pytest_config, "default_plugins", ()),
    )
    names += [f"_pytest.{name}" for name in builtin]
    names += [m.name for m in pkgutil.walk_packages(pytest_mxperf.__path__, "pytest_mxperf.")]
    found = entry_points()
    plugins = (
        found.select(group="pytest11") if hasattr(found, "select") else found.get("pytest11", ())
    )
    names += sorted({e.value.split(":")[0] for e in plugins})
    return ",".join(dict.fromkeys(names))


def available() -> bool:
    """Fork servers need ``fork`` and sessions (POSIX)."""
    return hasattr(os, "fork") and hasattr(os, "setsid") and sys.platform != "win32"
