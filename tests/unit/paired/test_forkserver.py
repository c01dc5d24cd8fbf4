"""The fork server of paired-run sides: each run a child of its own, bounded in time, and no
process outlives a run, the server, or a controller that dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from types import FrameType

import pytest

from pytest_mxperf.paired import forkserver
from pytest_mxperf.paired.forkserver import PRELOAD_ENV, ForkServer

#: A test module, written into a test's directory (`tests/data/terminated_worker.py`).
TERMINATED_WORKER_TEST = (
    next(p for p in Path(__file__).resolve().parents if p.name == "tests")
    / "data"
    / "terminated_worker.py"
).read_text()

pytestmark = pytest.mark.skipif(not forkserver.available(), reason="needs fork (POSIX)")

ARGS = ["-q", "-s", "-p", "no:cacheprovider", "-o", "addopts="]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers; it is gone for our purpose once its parent reaps it.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _gone(*pids: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ForkServer]:
    env = dict(os.environ, **{PRELOAD_ENV: "wave"})
    srv = ForkServer(env)
    yield srv
    srv.close()
    assert _gone(srv.pid)


def test_each_run_is_a_child_of_its_own_with_the_preloaded_modules(
    server: ForkServer, tmp_path: Path
) -> None:
    (tmp_path / "test_side.py").write_text(
        textwrap.dedent(
            """
            import os, sys
            def test_side():
                print("pid", os.getpid(), "ppid", os.getppid())
                assert "wave" in sys.modules  # imported once, by the server
                import gc  # ... and frozen there: a side's collections skip what it imported
                assert gc.get_freeze_count() > 1000, gc.get_freeze_count()
                assert "xml.dom.minidom" not in sys.modules  # a sibling's import stays there
                import xml.dom.minidom
            """
        )
    )
    first = server.run([*ARGS, "test_side.py"], cwd=tmp_path, timeout=60)
    second = server.run([*ARGS, "test_side.py"], cwd=tmp_path, timeout=60)
    pids = []
    for done in (first, second):
        assert (done.returncode, done.timed_out) == (0, False), done.tail
        line = next(t for t in done.tail.splitlines() if t.startswith("pid"))
        _, pid, _, ppid = line.split()[:4]
        assert int(ppid) == server.pid
        pids.append(int(pid))
    assert pids[0] != pids[1] and server.pid not in pids


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs a platform that pins and 2 or more CPUs",
)
def test_a_pinned_server_forks_pinned_children(tmp_path: Path) -> None:
    usable = os.sched_getaffinity(0)
    chosen = {max(usable)}
    (tmp_path / "test_side.py").write_text(
        "import os\ndef test_side():\n    print('cpus', sorted(os.sched_getaffinity(0)))\n"
    )
    srv = ForkServer(dict(os.environ, **{PRELOAD_ENV: ""}), cpus=chosen)
    try:
        assert os.sched_getaffinity(srv.pid) == chosen
        done = srv.run([*ARGS, "test_side.py"], cwd=tmp_path, timeout=60)
    finally:
        srv.close()
    assert done.returncode == 0, done.tail
    assert f"cpus {sorted(chosen)}" in done.tail.splitlines()
    assert os.sched_getaffinity(0) == usable  # the controller is left as it was


def test_a_failing_side_reports_its_exit_code_and_output(
    server: ForkServer, tmp_path: Path
) -> None:
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert 1 == 2, 'side says no'\n")
    done = server.run([*ARGS, "test_bad.py"], cwd=tmp_path, timeout=60)
    assert done.returncode == 1 and not done.timed_out
    assert "side says no" in done.tail


HANGS = """
import os, subprocess, time
def test_hangs():
    child = subprocess.Popen(["sleep", "60"])
    with open("pids", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    time.sleep(60)
"""


def _pids(path: Path) -> list[int]:
    deadline = time.monotonic() + 30
    while not (path / "pids").exists() or not (path / "pids").read_text():
        assert time.monotonic() < deadline, "the side never started"
        time.sleep(0.05)
    return [int(p) for p in (path / "pids").read_text().split()]


def test_a_side_over_time_is_killed_with_what_it_started(
    server: ForkServer, tmp_path: Path
) -> None:
    (tmp_path / "test_hangs.py").write_text(HANGS)
    done = server.run([*ARGS, "test_hangs.py"], cwd=tmp_path, timeout=2, grace=1)
    assert done.timed_out and "timed out after 2 s" in done.describe(2)
    assert _gone(*_pids(tmp_path))
    # The server goes on serving.
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    assert server.run([*ARGS, "test_ok.py"], cwd=tmp_path, timeout=60).returncode == 0


def test_ctrl_c_while_waiting_kills_the_side(server: ForkServer, tmp_path: Path) -> None:
    (tmp_path / "test_hangs.py").write_text(HANGS)

    fired: list[bool] = []

    def interrupt(signum: int, frame: FrameType | None) -> None:
        # Ctrl-C once the side and its child run (they wrote their pids), not at a fixed time;
        # once only: the clean-up it interrupts must not be interrupted in turn.
        if not fired and (tmp_path / "pids").exists() and (tmp_path / "pids").read_text():
            fired.append(True)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
        with pytest.raises(KeyboardInterrupt):
            server.run([*ARGS, "test_hangs.py"], cwd=tmp_path, timeout=60, grace=1)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _gone(*_pids(tmp_path))
    assert server.alive()


CONTROLLER = """
import os, sys
from pytest_mxperf.paired.forkserver import ForkServer
srv = ForkServer(dict(os.environ))
print(srv.pid, flush=True)
srv.run({args!r}, cwd={cwd!r}, timeout=120)
"""


def test_a_dead_controller_takes_the_server_and_its_side_along(tmp_path: Path) -> None:
    (tmp_path / "test_hangs.py").write_text(HANGS)
    code = CONTROLLER.format(args=[*ARGS, "test_hangs.py"], cwd=str(tmp_path))
    # A SIGKILLed controller cannot remove its temporary directory: keep it in tmp_path.
    env = dict(os.environ, **{PRELOAD_ENV: "", "TMPDIR": str(tmp_path)})
    controller = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert controller.stdout is not None
        server_pid = int(controller.stdout.readline())
        side, sleeper = _pids(tmp_path)
        controller.kill()  # no cleanup code runs: only the closed pipe tells the server
        controller.wait()
        assert _gone(server_pid, side, sleeper, within=10)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
        if controller.stdout is not None:
            controller.stdout.close()


@pytest.mark.parametrize(
    ("cpus", "usable", "count", "places"),
    [
        ({1}, {0, 1}, 2, [{1}, {0}]),
        ({2, 3}, {0, 1, 2, 3}, 2, [{2, 3}, {0, 1}]),
        ({1, 2}, {0, 1, 2}, 2, None),  # one CPU to spare is not two: one after the other
        ({1}, {1}, 2, None),
        ({1}, None, 2, None),
        (None, {0, 1}, 2, [None, None]),  # not pinned: at once, anywhere
        ({1}, {1}, 1, [{1}]),
    ],
)
def test_servers_import_at_once_only_on_as_many_cpus_of_their_own(
    cpus: set[int] | None, usable: set[int] | None, count: int, places: list[set[int] | None]
) -> None:
    def f(c: set[int] | None) -> frozenset[int] | None:
        return None if c is None else frozenset(c)

    got = forkserver.import_places(f(cpus), f(usable), count)
    assert got == (None if places is None else [f(p) for p in places])


def test_a_server_imports_elsewhere_only_on_as_many_cpus() -> None:
    with pytest.raises(ValueError, match="as many CPUs"):
        ForkServer(dict(os.environ), cpus={1}, import_cpus={0, 1})
    with pytest.raises(ValueError, match="needs cpus"):
        ForkServer(dict(os.environ), import_cpus={0})


THREADS_SIDE = """
import os
import mxnet as mx

def test_side():
    x = mx.nd.ones((4, 16, 32, 32))
    w = mx.nd.ones((16, 16, 3, 3))
    mx.nd.Convolution(x, w, kernel=(3, 3), num_filter=16, no_bias=True).wait_to_read()
    tasks = os.listdir("/proc/self/task")
    places = {tuple(sorted(os.sched_getaffinity(int(t)))) for t in tasks}
    print("threads", len(tasks), "cpus", sorted(places))
"""


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs a platform that pins and 2 or more CPUs",
)
def test_a_server_that_imported_mxnet_elsewhere_forks_sides_like_one_that_did_not(
    tmp_path: Path,
) -> None:
    # MXNet sizes its thread pools from the CPUs a process may use at import; one CPU there
    # and one here give the same pools, and the server moves to the sides' CPU before it is
    # ready, so its children run exactly as a server's that imported there.
    pytest.importorskip("mxnet")
    usable = sorted(os.sched_getaffinity(0))
    timing, other = {usable[-1]}, {usable[0]}
    (tmp_path / "test_side.py").write_text(THREADS_SIDE)
    env = dict(os.environ, **{PRELOAD_ENV: "mxnet"})
    lines = []
    for import_cpus in (None, other):
        srv = ForkServer(env, cpus=timing, import_cpus=import_cpus, wait=False)
        try:
            srv.wait_ready()
            assert os.sched_getaffinity(srv.pid) == timing
            done = srv.run([*ARGS, "test_side.py"], cwd=tmp_path, timeout=120)
        finally:
            srv.close()
        assert done.returncode == 0, done.tail
        lines.append(next(t for t in done.tail.splitlines() if t.startswith("threads")))
    assert lines[0] == lines[1]
    assert lines[0].endswith(f"cpus [({timing.pop()},)]")


def test_by_default_a_server_preloads_mxnet_then_what_each_side_would_import_again() -> None:
    # Every side forked from the server runs the run facts' commit detection (GitPython), this
    # package's hooks and whatever root conftest imports it, and pytest loads its own plugins
    # and the environment's (by entry point) in each: imported once in the server, not once a
    # side.
    names = forkserver.default_preload().split(",")
    assert names[0] == "mxnet"
    assert "git" in names
    assert {"pytest_mxperf.plugin.sidehooks", "pytest_mxperf.paired.turns"} <= set(names)
    assert {"_pytest.junitxml", "_pytest.debugging", "_pytest.terminal"} <= set(names)
    found = entry_points()
    group = found.select(group="pytest11") if hasattr(found, "select") else found["pytest11"]
    assert {e.value.split(":")[0] for e in group} <= set(names)
    assert len(names) == len(set(names))
    # Nothing of the repository under test: its conftest files and tests are each side's own.
    assert not any(n.startswith(("conftest", "tests")) for n in names)


def test_a_sides_terminated_workers_leave_no_temporary_directory(tmp_path: Path) -> None:
    # A side's data-loader workers, ended with terminate(), would each leave a /tmp/pymp-*
    # (a side ends with os._exit, which runs no exit handler): they share the server's.
    root = tmp_path / "tmp"
    root.mkdir()
    (tmp_path / "test_side.py").write_text(TERMINATED_WORKER_TEST)
    srv = ForkServer(dict(os.environ, TMPDIR=str(root), **{PRELOAD_ENV: ""}))
    try:
        done = srv.run([*ARGS, "test_side.py"], cwd=tmp_path, timeout=60)
        assert done.returncode == 0, done.tail
        (used,) = [line.split()[1] for line in done.tail.splitlines() if line.startswith("worker")]
        assert Path(used).parent == root and Path(used).name.startswith("pymp-")
    finally:
        srv.close()
    assert _gone(srv.pid)
    assert list(root.iterdir()) == []  # the server removed it as it exited
