"""A fork server for the sides of a paired run: one process imports Python, pytest, this plugin
and MXNet once; every side of every round is a child forked from it.

A side of a round is still a process of its own (its own pytest session, MXNet engine state and
memory; nothing a child does reaches the next one), but it no longer pays the interpreter start
and ``import mxnet`` (about 1.3 s of a 3 s side on a 2-vCPU VM). MXNet supports being forked
after import (its engine stops and restarts its threads around ``fork``); no operator has run
in the server, so no OpenMP pool or device context is inherited.

Protocol, one JSON object per line: the controller writes ``{"args", "cwd", "log"}`` to the
server's stdin; the server forks, answers ``{"pid"}``, and ``{"exit"}`` once the child is done.
A child starts its own session (its pid is its process group), so the controller kills it and
whatever it started exactly as `procgroup.run_bounded` does. The server exits, killing a
running child, when its stdin closes: with the controller's `ForkServer.close` or its death.
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

from pytest_mxperf.system import cpus as cpu_sets
from pytest_mxperf.system import pluginpath, procgroup, scratch

#: Modules the server imports before forking (comma-separated; empty: none; unset:
#: `default_preload`). The fake back end of this repository's own tests needs no MXNet, so its
#: pytester runs set their own list.
PRELOAD_ENV = "PYTEST_MXPERF_SIDE_PRELOAD"
DEFAULT_PRELOAD = "mxnet"
#: Seconds the server may take to start (imports included) before it is given up on.
START_TIMEOUT = 120.0

SERVER = r"""
import json, os, select, signal, sys, traceback
sys.path.insert(0, {root!r})
import pytest, pytest_mxperf.plugin
for name in filter(None, os.environ.get({preload_env!r}, {default!r}).split(",")):
    try:
        if name.strip() == "mxnet":
            from pytest_mxperf.system.mxnet_import import import_mxnet
            import_mxnet()
        else:
            __import__(name.strip())
    except Exception:
        pass  # the child imports it again and reports why it cannot
from pytest_mxperf.system.scratch import share_worker_tempdir
share_worker_tempdir()  # the children's data-loader workers share it; removed as this exits
if {pin!r} is not None:  # imported elsewhere (beside another server): to the side's CPUs now
    from pytest_mxperf.system.cpus import pin_threads
    pin_threads({pin!r})
import gc
gc.freeze()  # what was imported stays out of the children's collections (pytest runs several)

def child(req):
    os.setsid()
    try:  # die with the server, whatever kills it
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0); os.dup2(fd, 1); os.dup2(fd, 2)
    code = 4
    try:
        os.chdir(req["cwd"])
        sys.argv = ["pytest", *req["args"]]
        code = int(pytest.main(req["args"]))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)

def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()

answer({{"ready": os.getpid()}})
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(req)
    answer({{"pid": pid}})
    try:  # readable when the child exits (Linux): its exit is told then, not at the next poll
        exited = [os.pidfd_open(pid)]
    except (AttributeError, OSError):
        exited = []
    while True:
        ready, _, _ = select.select([sys.stdin, *exited], [], [], 0.05)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            for fd in exited: os.close(fd)
            answer({{"exit": os.waitstatus_to_exitcode(status)}})
            break
        if sys.stdin in ready and not sys.stdin.buffer.peek(1):  # the controller is gone
            try: os.killpg(pid, signal.SIGKILL)
            except OSError: pass
            os.waitpid(pid, 0)
            sys.exit(0)
"""


class ForkServerError(RuntimeError):
    """The server could not start or stopped answering; the side runs as a plain process."""


class ForkServer:
    """One server process per side of a paired run; `run` has the contract of
    `procgroup.run_bounded`. With ``cpus``, the server is pinned to them before it imports
    anything, and so is every child (MXNet sizes its thread pool from the CPUs a process may
    use). With ``import_cpus`` (as many CPUs as ``cpus``: the same thread pool), it imports
    pinned there and moves to ``cpus`` before it is ready, so two servers can import at once.
    With ``wait`` False the server is started but not waited for: call `wait_ready`."""

    def __init__(
        self,
        env: Mapping[str, str],
        python: str = sys.executable,
        cpus: Collection[int] | None = None,
        import_cpus: Collection[int] | None = None,
        wait: bool = True,
    ) -> None:
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
        self._started = time.monotonic()
        self._proc = subprocess.Popen(
            [python, "-c", code],
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=cpu_sets.pinning(import_cpus if moved else cpus),
        )
        #: The server's pid (its own process group).
        self.pid = self._proc.pid
        self._ready = False
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until the server has imported what it preloads (at most `START_TIMEOUT` from
        its start; at once when it has); a server that fails to start is closed.

        :raises ForkServerError: it did not start."""
        if self._ready:
            return
        try:
            ready = self._read(START_TIMEOUT - (time.monotonic() - self._started))
        except BaseException:
            self.close()
            raise
        if "ready" not in ready:
            self.close()
            raise ForkServerError(f"unexpected first answer {ready!r}")
        self._ready = True

    def alive(self) -> bool:
        return self._proc.poll() is None

    def _read(self, timeout: float) -> dict[str, Any]:
        """The server's next answer; raises ForkServerError when it is gone or silent."""
        out: IO[bytes] | None = self._proc.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], max(0.0, timeout))
        if not ready:
            raise ForkServerError(f"no answer in {timeout:g} s")
        line = out.readline()
        if not line:
            raise ForkServerError(f"the server exited (code {self._proc.poll()})")
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
            stdin = self._proc.stdin
            assert stdin is not None
            try:
                stdin.write((json.dumps(request) + "\n").encode())
                stdin.flush()
            except OSError as exc:
                raise ForkServerError(f"the server does not take requests ({exc})") from None
            pid = int(self._read(START_TIMEOUT)["pid"])
            timed_out, code = False, None
            try:
                remaining = timeout - (time.monotonic() - start)
                try:
                    code = int(self._read(remaining)["exit"])
                except ForkServerError:
                    if self._proc.poll() is not None:
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
        """Stop the server: its stdin closes, it kills a running child and exits; what is left
        of its group after a moment is killed."""
        proc = self._proc
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        _wait_exit(proc, 5.0)
        procgroup.kill_group(proc, 1.0)
        if proc.stdout is not None:
            proc.stdout.close()


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait up to ``timeout`` s for ``proc`` to exit: woken by its exit where a pidfd tells it
    (Linux), not by `subprocess.Popen.wait`'s polling, whose growing naps overshot a server's
    30 ms exit to about 65 ms."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfds here, or the server is reaped already
        pidfd = None
    if pidfd is not None:
        try:
            select.select([pidfd], [], [], timeout)
        finally:
            os.close(pidfd)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=0.0 if pidfd is not None else timeout)


def import_places(
    cpus: frozenset[int] | None, usable: frozenset[int] | None, count: int
) -> list[frozenset[int] | None] | None:
    """Where ``count`` servers whose sides run on ``cpus`` import MXNet at once: the first on
    ``cpus``, each other on as many CPUs of its own (an equal count gives the same thread pool);
    all anywhere when the sides are not pinned. None when there are not enough CPUs to spare:
    then they start one after the other on ``cpus`` (two imports on one CPU gain nothing)."""
    if cpus is None:
        return [None] * count
    spare = sorted((usable or frozenset()) - cpus)
    size = len(cpus)
    if len(spare) < size * (count - 1):
        return None
    return [cpus, *(frozenset(spare[i * size : (i + 1) * size]) for i in range(count - 1))]


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
