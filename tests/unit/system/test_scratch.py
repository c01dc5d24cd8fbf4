"""Temporary directories: the ``/tmp/pymp-*`` of data-loader workers that a pool terminates."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
