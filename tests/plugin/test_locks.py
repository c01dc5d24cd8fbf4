"""Device locks are machine-wide: separate pytest runs take turns, and a killed run never
leaves anything that blocks the next one. Real processes, fake back end."""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_mxperf.system import locks

#: A fake back end that holds its device for real time while preparing, so two runs that
#: measured at once would show overlapping windows.
SLOW_CONFTEST = """
import os, pathlib, time
import pytest
from pytest_mxperf.testing import FakeBackend

class SlowBackend(FakeBackend):
    def prepare(self, model, spec):
        pathlib.Path(os.environ["MXPERF_TEST_STARTED"]).touch()
        time.sleep(float(os.environ.get("MXPERF_TEST_HOLD", "0.3")))
        return super().prepare(model, spec)

@pytest.fixture(scope="session")
def mxperf_backend():
    return SlowBackend()
"""

SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("model", ["a", "b", "c", "d"])
def test_bench(mxperf, model):
    mxperf.inference(FakeModel(images_per_sec=100.0), batch_size=4, model=model)
"""


@pytest.fixture
def shared_tmp(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytester.makeconftest(SLOW_CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return tmp_path_factory.mktemp("shared-tmp")


def _start(cwd: Path, tmp: Path, name: str, hold: float = 0.3) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MXPERF_"))}
    # TMPDIR: the lock directory of these runs is theirs alone, not this machine's real one.
    env.update(
        TMPDIR=str(tmp),
        MXPERF_TEST_STARTED=str(cwd / f"{name}.started"),
        MXPERF_TEST_HOLD=str(hold),
        PYTHONUNBUFFERED="1",  # lines arrive as they are written
    )
    args = ["-m", "pytest", "-p", "no:cacheprovider", "--mxperf", "--mxperf-json", f"{name}.json"]
    # Unbuffered: a test that waits on the pipe with select() must not have lines sitting in
    # a reader's buffer, where select() cannot see them.
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        bufsize=0,
    )


def test_two_runs_take_turns(pytester: pytest.Pytester, shared_tmp: Path) -> None:
    runs = [_start(pytester.path, shared_tmp, name) for name in ("one", "two")]
    for run in runs:
        out, _ = run.communicate(timeout=120)
        assert run.returncode == 0, out.decode()
    windows = []
    for name in ("one", "two"):
        cases = json.loads((pytester.path / f"{name}.json").read_text())["cases"]
        windows += [(c["window"][0], c["window"][1], name) for c in cases]
    assert len(windows) == 8
    windows.sort()
    for (_, end, a), (start, _, b) in zip(windows, windows[1:]):
        assert start >= end, f"runs {a} and {b} measured at the same time: {windows}"
    uid = os.getuid()
    assert (shared_tmp / f"pytest-mxperf-{uid}" / "cpu.lock").exists()


def test_sigterm_leaves_nothing_that_blocks(pytester: pytest.Pytester, shared_tmp: Path) -> None:
    lock_dir = shared_tmp / f"pytest-mxperf-{os.getuid()}"
    lock_dir.mkdir()
    (lock_dir / "cpu.lock").write_text("stale: pid 999999, long gone\n")  # tolerated
    holder = _start(pytester.path, shared_tmp, "holder", hold=600)
    started = pytester.path / "holder.started"
    deadline = time.monotonic() + 120
    while not started.exists():  # the holder now owns the CPU lock, inside a case
        assert holder.poll() is None and time.monotonic() < deadline, "holder never started"
        time.sleep(0.05)
    holder.send_signal(signal.SIGTERM)
    holder.communicate(timeout=60)
    assert holder.returncode == -signal.SIGTERM
    after = _start(pytester.path, shared_tmp, "after", hold=0)
    out, _ = after.communicate(timeout=120)  # would hang if the lock outlived its holder
    assert after.returncode == 0, out.decode()
    per_run = [
        p.name for p in shared_tmp.iterdir() if re.fullmatch(r"pytest-mxperf-\w{12}", p.name)
    ]
    assert per_run == [], f"run directories left behind: {per_run}"


def test_a_run_that_has_to_wait_says_who_holds_the_device(
    pytester: pytest.Pytester, shared_tmp: Path
) -> None:
    lock = shared_tmp / f"pytest-mxperf-{os.getuid()}" / "cpu.lock"
    with locks.exclusive(lock):  # this process is measuring: the run has to wait its turn
        waiter = _start(pytester.path, shared_tmp, "waiter", hold=0)
        assert waiter.stdout is not None
        told, lines = None, []
        deadline = time.monotonic() + 120
        while told is None and time.monotonic() < deadline and waiter.poll() is None:
            ready, _, _ = select.select([waiter.stdout], [], [], 1.0)
            if ready:
                line = waiter.stdout.readline().decode()
                lines.append(line)
                if "waiting for the cpu lock" in line:
                    told = line
        if told is None:
            waiter.kill()
            waiter.communicate()
        assert told is not None, "".join(lines)
    out, _ = waiter.communicate(timeout=120)  # the lock is free now: the run measures
    assert waiter.returncode == 0, out.decode()
    assert told.startswith("mxperf: a/inference/float32/bs4/cpu: waiting for the cpu lock: ")
    assert f"another pytest --mxperf run on this machine is measuring (pid {os.getpid()})" in told


def test_a_lock_step_round_holds_the_cpu_and_every_gpu_lock(tmp_path: Path) -> None:
    from pytest_mxperf.baselines.resolution import Resolution
    from pytest_mxperf.baselines.runinfo import RunInfo
    from pytest_mxperf.system.gitinfo import CommitInfo

    gpus = [{"index": str(i), "name": "G", "uuid": f"GPU-{u}"} for i, u in enumerate("ba")]
    run = RunInfo(
        run_id="r",
        started="2024-01-01T00:00:00+00:00",
        rootdir=".",
        baseline_root="baselines",
        commit=CommitInfo("a" * 40, None, None, None, "git"),
        cpu_key="cpu-x",
        machine=None,
        gpus=gpus,
        baselines=Resolution(),
        lock_dir=str(tmp_path),
    )
    names = run.device_lock_names()
    assert names == ["cpu", "gpu-gpu-a", "gpu-gpu-b"]  # by UUID, one order for every run
    assert names == ["cpu", run.device_lock_name("gpu", 1), run.device_lock_name("gpu", 0)]

    def busy(device: str) -> bool:
        # flock locks of separate open files conflict within one process too.
        with open(tmp_path / f"{device}.lock", "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False

    with locks.all_devices(str(tmp_path), names[::-1]):
        assert [busy(n) for n in names] == [True, True, True]
        assert (tmp_path / "cpu.lock").read_text() == f"pid {os.getpid()}\n"
    assert [busy(n) for n in names] == [False, False, False]


def test_several_device_locks_are_taken_in_one_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[str] = []
    real = locks.device_lock

    def record(lock_dir: str, device: str, on_wait: object = None) -> object:
        taken.append(device)
        return real(lock_dir, device)

    monkeypatch.setattr(locks, "device_lock", record)
    with locks.all_devices(str(tmp_path), ["gpu-b", "cpu", "gpu-a", "cpu"]):
        pass
    assert taken == ["cpu", "gpu-a", "gpu-b"]
