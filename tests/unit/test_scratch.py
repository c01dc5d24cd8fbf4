"""Temporary directories: the ``/tmp/pymp-*`` of data-loader workers that a pool terminates."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: A process that forks two workers, each making its `multiprocessing` temporary directory (as a
#: Gluon DataLoader's worker does when it shares a batch) and then busy, ends them with
#: ``terminate()`` (as a DataLoader's pool does) and exits; it prints the directories they used.
POOL = textwrap.dedent(
    """
    import multiprocessing, multiprocessing.util, sys, time
    from pytest_mxperf.system.scratch import share_worker_tempdir

    def work(conn):
        conn.send(multiprocessing.util.get_temp_dir())
        time.sleep(60)  # busy when terminated

    if __name__ == "__main__":
        if sys.argv[1] == "share":
            print("parent", share_worker_tempdir())
        ctx = multiprocessing.get_context("fork")
        used = []
        for _ in range(2):
            here, there = ctx.Pipe()
            worker = ctx.Process(target=work, args=(there,), daemon=True)
            worker.start()
            used.append(here.recv())
            worker.terminate()
            worker.join()
        print("workers", *sorted(set(used)))
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
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    return lines["workers"].split(), sorted(p.name for p in root.iterdir())


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_terminated_workers_share_their_parents_temporary_directory(tmp_path: Path) -> None:
    # Unshared, each terminated worker leaves its own pymp-* behind ...
    used, left = _run(tmp_path, "own")
    assert len(used) == 2 and len(left) == 2 and all(name.startswith("pymp-") for name in left)
    # ... shared, both use the parent's, which the parent removes as it exits.
    used, left = _run(tmp_path, "share")
    assert len(used) == 1 and Path(used[0]).parent == tmp_path / "share"
    assert left == []
