"""Run a command in its own process group, bounded in time, and never leave a process behind.

Used by the paired-run sides and the per-revision environment builds. POSIX only: it relies on
sessions and process groups (``start_new_session=True`` and ``os.killpg``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_mxperf.system import cpus as cpu_sets

#: Lines of combined stdout/stderr kept for error messages.
TAIL_LINES = 40
#: Bytes read from the end of the output to find those lines.
_TAIL_BYTES = 64 * 1024
#: Seconds allowed for killed processes to finish exiting.
_EXIT_WAIT = 2.0


@dataclass(frozen=True)
class Finished:
    """How a bounded command ended.

    :param returncode: the exit code; negative for "killed by signal -N" (subprocess's custom).
    :param timed_out: True when the time limit killed it.
    :param seconds: wall time from start to the end of the process group cleanup.
    :param tail: the last lines of its combined stdout and stderr.
    """

    returncode: int
    timed_out: bool
    seconds: float
    tail: str

    def describe(self, timeout: float) -> str:
        """A short phrase for messages: "exited with code 1", "timed out after 30 s"."""
        if self.timed_out:
            return f"timed out after {timeout:g} s and was killed"
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"was killed by {name}"
        return f"exited with code {self.returncode}"


def tail_text(data: bytes, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``data``, decoded leniently (tools print any bytes)."""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a member (a zombie counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - pgid reused by another user's process
        return False
    return True


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the whole process group of ``proc``, SIGKILL what is left after ``grace`` s.

    The group id is the leader's pid (``start_new_session=True``). Members that already exited
    but were not reaped (zombies) still answer ``killpg(pgid, 0)``; hence the grace period is a
    bound, and the final SIGKILL is sent regardless.
    """
    pgid = proc.pid
    if proc.returncode is None or group_alive(pgid):
        end_group(pgid, grace, leader_done=lambda: proc.poll() is not None)
    # Reap the leader; after SIGKILL this cannot block for long.
    proc.wait()
    wait_group_gone(pgid)


def end_group(pgid: int, grace: float, leader_done: Callable[[], bool] = lambda: True) -> None:
    """SIGTERM group ``pgid``, wait up to ``grace`` s for it to empty (and ``leader_done``),
    then SIGKILL whatever is left."""
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if leader_done() and not group_alive(pgid):
            break
        time.sleep(0.02)
    signal_group(pgid, signal.SIGKILL)


def wait_group_gone(pgid: int) -> None:
    """Wait briefly for group ``pgid`` to be empty after a SIGKILL, which is delivered
    asynchronously: a member may still be on its way out (most likely on a loaded machine).
    Bounded, in case a zombie grandchild awaits a reaper that never comes."""
    deadline = time.monotonic() + _EXIT_WAIT
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def run_bounded(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    timeout: float,
    grace: float = 5.0,
    poll: float = 0.5,
    on_tick: Callable[[float], None] | None = None,
    cpus: Collection[int] | None = None,
) -> Finished:
    """Run ``argv`` in a new session, wait at most ``timeout`` seconds, then clean up its group.

    The whole process group is always terminated at the end, also after a normal exit (a
    grandchild left running would disturb the next measurement) and when anything, including
    KeyboardInterrupt raised by ``on_tick`` or by a signal, interrupts the wait; that exception
    is re-raised after the cleanup. A grandchild that starts its own session escapes the group:
    that is the limit of process groups.

    :param on_tick: called with the elapsed seconds every ``poll`` seconds while it runs.
    :param cpus: pin the command (and all it starts) to these CPUs.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0, got {timeout!r}")
    # A file, not a pipe: a chatty child can never block on a full pipe while we wait.
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=cpu_sets.pinning(cpus),
        )
        timed_out = False
        try:
            deadline = start + timeout
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                try:
                    proc.wait(timeout=min(poll, remaining))
                    break
                except subprocess.TimeoutExpired:
                    if on_tick is not None:
                        on_tick(time.monotonic() - start)
        finally:
            # Runs on normal exit, timeout and any exception (KeyboardInterrupt included).
            kill_group(proc, grace)
        seconds = time.monotonic() - start
        out.seek(max(0, out.seek(0, os.SEEK_END) - _TAIL_BYTES))
        tail = tail_text(out.read())
    return Finished(proc.returncode, timed_out, seconds, tail)
