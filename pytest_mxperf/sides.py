"""One side process of a paired run: bounded in time, in its own process group, never left
running (timeout, failure or Ctrl-C end the whole group)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Seconds between SIGTERM and SIGKILL when a side must stop.
GRACE = 5.0
TAIL_LINES = 40


@dataclass(frozen=True)
class SideRun:
    """How a side process ended, and the tail of what it printed."""

    returncode: int | None
    timed_out: bool
    tail: str

    @property
    def failed(self) -> bool:
        # pytest's exit 1 means a test failed, which a side reports in its own results.
        return self.timed_out or self.returncode not in (0, 1)

    def describe(self) -> str:
        what = "timed out" if self.timed_out else f"exited with status {self.returncode}"
        return f"the side process {what}:\n{self.tail}"


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, SIGKILL it after `GRACE` seconds."""
    for sig, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_side(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float) -> SideRun:
    """Run ``argv`` to completion or ``timeout`` seconds; output goes to a temporary file whose
    last lines come back (a side prints a pytest session)."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: a kill reaches the MXNet workers too
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if proc.poll() is None:
                kill_group(proc)
            else:
                # The leader is gone; anything it left in its group goes too.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        out.seek(0)
        lines = out.read().decode("utf-8", "replace").splitlines()
    return SideRun(proc.returncode, timed_out, "\n".join(lines[-TAIL_LINES:]))
