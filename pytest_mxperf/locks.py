"""One cross-process exclusive lock (``flock``), used for device turns and baseline writes."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block.

    ``flock`` locks die with their process, so a killed holder never blocks later runs.
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
    """Two benchmarks never measure on the same device at once: all CPU cases share one lock,
    each GPU has its own."""
    os.makedirs(lock_dir, exist_ok=True)
    return exclusive(Path(lock_dir) / f"{device}.lock")
