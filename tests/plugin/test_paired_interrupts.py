"""Paired runs (``--mxperf-ab``) ended from outside in the middle of a round: Ctrl-C and
SIGTERM end the run and everything it started, leaving no worktree, process or file; what a
SIGKILLed run left, the next paired run removes (issue 29 item 9)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from pytest_mxperf.testing.procs import descendants, gone
from pytest_mxperf.testing.repos import SLOW_SUITE, commit_two, worktrees

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

AB = ("--mxperf-ab", "HEAD~1", "--mxperf-min-time", "0.3", "--mxperf-warmup-time", "0.1")


def _default_sigint() -> None:
    # A runner started in the background of a shell ignores SIGINT, and children inherit that:
    # give the controller Python's own Ctrl-C handling whatever this process has.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_paired(path: Path) -> subprocess.Popen[bytes]:
    """``pytest --mxperf`` with `AB` in ``path``, in a session of its own."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--mxperf", *AB],
        cwd=path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )


def _scratch(tmp: Path, pid: int) -> list[str]:
    """Scratch directories under ``tmp``, and those of the run ``pid`` under /tmp: a TMPDIR
    too deep for a lock-step socket (a test's under xdist, ``.../popen-gw0/...``) puts the
    round's there (`siderun.round_tmp`), where other runs' may be too."""
    here = [p.name for p in tmp.glob("pytest-mxperf-*/scratch/*")]
    short = [p.name for p in Path("/tmp").glob(f"pytest-mxperf-*/scratch/mxperf-*-{pid}-*")]
    return sorted(here + short)


def _when_a_side_runs(proc: subprocess.Popen[bytes], path: Path) -> list[int]:
    """Once a round has begun and a side runs: the run's processes then."""
    deadline = time.monotonic() + 120
    while len(worktrees(path)) < 2:  # REV's worktree exists: the rounds are near
        assert time.monotonic() < deadline and proc.poll() is None, "no worktree appeared"
        time.sleep(0.1)
    # A round's directory exists: the rounds have begun (a fixed wait was too short under
    # load: the run was killed before its first round, leaving only the servers' directories).
    tmp = Path(os.environ["TMPDIR"])
    while not any(name.startswith(f"mxperf-pair-{proc.pid}-") for name in _scratch(tmp, proc.pid)):
        assert time.monotonic() < deadline and proc.poll() is None, "no round started"
        time.sleep(0.1)
    time.sleep(1.0)
    sides = descendants(proc.pid)
    assert sides, "no side process was running"
    return sides


def _files(path: Path) -> list[str]:
    return sorted(p.name for p in path.rglob("*") if ".git" not in p.parts)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_mid_round_ends_the_run_leaving_no_worktree_process_or_file(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], sig: signal.Signals
) -> None:
    commit_two(fake_pytester, SLOW_SUITE)
    before = _files(fake_pytester.path)
    tmp = Path(os.environ["TMPDIR"])
    proc = _start_paired(fake_pytester.path)
    try:
        sides = _when_a_side_runs(proc, fake_pytester.path)
        assert _scratch(tmp, proc.pid), "a round's directory is under scratch"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)  # never leave a Popen for the garbage collector to warn about
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out.decode()[-2000:]
    assert len(worktrees(fake_pytester.path)) == 1
    assert gone(sides, within=10), "a side outlived it"
    after = _files(fake_pytester.path)
    # Bytecode caches are not what a run leaves (pytest 8 writes a conftest's beside it).
    left = [p for p in after if p not in before and "__pycache__" not in p]
    assert [p for p in left if not p.endswith(".pyc")] == []
    assert _scratch(tmp, proc.pid) == []
    assert not list(tmp.glob("pytest-mxperf-cache-*/worktrees/*/*"))


GOOD = """
def test_model(mxperf):
    mxperf.callable(lambda: 1, items_per_call=8, model="model")
"""


def test_the_next_run_removes_what_a_sigkilled_one_left(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    commit_two(fake_pytester, SLOW_SUITE)
    tmp = Path(os.environ["TMPDIR"])
    proc = _start_paired(fake_pytester.path)
    try:
        _when_a_side_runs(proc, fake_pytester.path)
        # As `docker kill` does: every process of the run at once, no clean-up.
        everyone = [proc.pid, *descendants(proc.pid)]
        for pid in everyone:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert gone(everyone)
    left = _scratch(tmp, proc.pid)
    shared = not any(n.startswith("mxperf-pair-") for n in _scratch(tmp, -1))
    # Under /tmp (a deep TMPDIR, as under xdist) another run's sweep may remove it first.
    if not shared:
        assert any(name.startswith(f"mxperf-pair-{proc.pid}-") for name in left), left
    assert len(worktrees(fake_pytester.path)) == 2  # REV's, still registered
    # The next paired run (here of another revision) removes both.
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("C")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=1)
    assert len(worktrees(fake_pytester.path)) == 1
    assert _scratch(tmp, proc.pid) == []
    assert not list(tmp.glob("pytest-mxperf-cache-*/worktrees/*/*"))
