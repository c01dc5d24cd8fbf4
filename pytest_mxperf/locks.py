"""Cross-process exclusive locks (``flock``), used for device turns and baseline writes.

Device locks are machine-wide: one directory per user in the temporary directory
(`machine_lock_dir`), so separate pytest runs take turns on the CPU and on each GPU, not only
the xdist workers of one run. Lock files are never deleted (a process could hold a lock on an
unlinked file while another creates a new one); they are empty and harmless, and an ``flock``
dies with its process, so a killed or SIGTERMed holder never blocks a later run.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def machine_lock_dir() -> Path:
    """``<tempdir>/pytest-mxperf-<uid>``: the lock directory shared by every run of this user
    on this machine (created private to the user)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = Path(tempfile.gettempdir()) / f"pytest-mxperf-{uid}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block.

    ``flock`` locks die with their process, so a stale lock file whose owner is gone never
    blocks: whatever the file holds, only a live process's lock counts.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: atomic renames still protect files
            yield
            return
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def device_lock(lock_dir: str, device: str) -> contextlib.AbstractContextManager[None]:
    """Two benchmarks never measure on the same device at once, in this run or another: all
    CPU cases share one lock, each GPU has its own (``device`` names it)."""
    return exclusive(Path(lock_dir) / f"{device}.lock")
