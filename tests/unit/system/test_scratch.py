"""Temporary directories: the ``/tmp/pymp-*`` of data-loader workers that a pool terminates."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_mxperf.system import scratch

#: A test module, written into a test's directory (`tests/data/terminated_worker.py`).
TERMINATED_WORKER_TEST = (
    next(p for p in Path(__file__).resolve().parents if p.name == "tests")
    / "data"
    / "terminated_worker.py"
).read_text()

#: A process that runs `TERMINATED_WORKER_TEST`'s test twice (two workers, each making its
#: `multiprocessing` temporary directory and ended with ``terminate()`` while busy, as a
#: DataLoader's are), after `share_worker_tempdir` with "share"; it prints ``worker <dir>`` each.
POOL = TERMINATED_WORKER_TEST + textwrap.dedent(
    """
        if __name__ == "__main__":
            import sys
            from pytest_mxperf.system.scratch import share_worker_tempdir

            if sys.argv[1] == "share":
                share_worker_tempdir()
            test_loader()
            test_loader()
        """
)


def _run(tmp_path: Path, mode: str) -> tuple[list[str], list[str]]:
    root = tmp_path / mode
    root.mkdir()
    script = tmp_path / "pool.py"
    script.write_text(POOL)
    done = subprocess.run(
        [sys.executable, str(script), mode],
        env=dict(os.environ, TMPDIR=str(root)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    used = sorted(
        {line.split()[1] for line in done.stdout.splitlines() if line.startswith("worker")}
    )
    return used, sorted(p.name for p in root.iterdir())


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_terminated_workers_share_their_parents_temporary_directory(tmp_path: Path) -> None:
    # Unshared, each terminated worker leaves its own pymp-* behind ...
    used, left = _run(tmp_path, "own")
    assert len(used) == 2 and len(left) == 2 and all(name.startswith("pymp-") for name in left)
    # ... shared, both use the parent's, which the parent removes as it exits.
    used, left = _run(tmp_path, "share")
    assert len(used) == 1 and Path(used[0]).parent == tmp_path / "share"
    assert left == []


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_sweep_removes_only_our_marked_pymp_dirs_whose_maker_is_gone(tmp_path: Path) -> None:
    space = scratch._pid_namespace()
    dead = _dead_pid()
    made = {
        "pymp-dead": f"{scratch.OWNER_MARK}{space}-{dead}",
        "pymp-alive": f"{scratch.OWNER_MARK}{space}-{os.getpid()}",
        "pymp-unmarked": None,  # not ours (or not known to be): left alone
        "pymp-elsewhere": f"{scratch.OWNER_MARK}other-{dead}",  # another pid namespace
    }
    for name, mark in made.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "listener").write_text("")
        if mark:
            (tmp_path / name / mark).touch()
    assert scratch.sweep_worker_tempdirs(tmp_path) == [tmp_path / "pymp-dead"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "pymp-alive",
        "pymp-elsewhere",
        "pymp-unmarked",
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_killed_processs_pymp_dir_is_swept_by_the_next(tmp_path: Path) -> None:
    # A process that shares its worker directory, then dies as an MXNet abort ends it.
    script = (
        "import os, signal\n"
        "from pytest_mxperf.system.scratch import share_worker_tempdir\n"
        "print(share_worker_tempdir(), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    left = Path(done.stdout.strip())
    assert done.returncode == -9 and left.parent == tmp_path and left.is_dir()
    again = subprocess.run(
        [sys.executable, "-c", script.replace("os.kill(os.getpid(), signal.SIGKILL)\n", "")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert not left.exists()  # swept by the next process that shares one
    assert [p.name for p in tmp_path.iterdir()] == []  # and that one removed its own on exit
    assert again.stdout.strip().startswith(str(tmp_path / "pymp-"))
