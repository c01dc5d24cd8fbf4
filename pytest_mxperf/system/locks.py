"""Cross-process exclusive locks (``flock``), used for device turns and baseline writes.

Device locks are machine-wide: one directory per user in the temporary directory
(`machine_lock_dir`), so separate pytest runs take turns on the CPU and on each GPU, not only
the xdist workers of one run. Lock files are never deleted (a process could hold a lock on an
unlinked file while another creates a new one); they hold only the pid of their last holder
(named to a run that has to wait) and are harmless, and an ``flock`` dies with its process, so
a killed or SIGTERMed holder never blocks a later run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pytest_mxperf.system import tempdirs


def machine_lock_dir(base: str | Path | None = None) -> Path:
    """``<base or tempdir>/pytest-mxperf-<uid>``: the lock directory shared by every run of
    this user on this machine (created private to the user, and checked to be theirs alone:
    `tempdirs.private_dir`)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    base_dir = Path(base or tempfile.gettempdir())
    base_dir.mkdir(parents=True, exist_ok=True)
    # Refused (tempdirs.UnsafeTempDir) when another user owns it or could write into it.
    return tempdirs.private_dir(base_dir / f"pytest-mxperf-{uid}")


@contextlib.contextmanager
def exclusive(path: Path, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block.

    ``flock`` locks die with their process, so a stale lock file whose owner is gone never
    blocks: whatever the file holds, only a live process's lock counts. The holder writes its
    pid into the file; when the lock is busy, ``on_wait`` is told who holds it (``pid N``)
    before this process waits its turn.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: atomic renames still protect files
            yield
            return
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait(holder(path))
            fcntl.flock(fh, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()}\n")
            fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def holder(path: Path) -> str:
    """Who last took the lock at ``path`` (``pid N``), as its file says; ``unknown`` if it does
    not say (an older run, or a file being rewritten)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "unknown"
    return text.splitlines()[0][:60] if text.startswith("pid ") else "unknown"


def device_lock(
    lock_dir: str, device: str, on_wait: Callable[[str], None] | None = None
) -> contextlib.AbstractContextManager[None]:
    """Two benchmarks never measure on the same device at once, in this run or another: all
    CPU cases share one lock, each GPU has its own (``device`` names it). ``on_wait`` is told
    the holder when the device is busy (see `exclusive`)."""
    return exclusive(Path(lock_dir) / f"{device}.lock", on_wait)


@contextlib.contextmanager
def all_devices(
    lock_dir: str,
    devices: Sequence[str],
    on_wait: Callable[[str, str], None] | None = None,
) -> Iterator[None]:
    """Hold the device locks of ``devices`` together, taken in sorted order, so two runs that
    both take several never wait on each other in a cycle. ``on_wait`` is told the device and
    its holder before waiting for a busy one (see `exclusive`)."""
    with contextlib.ExitStack() as stack:
        for device in sorted(set(devices)):
            told = None if on_wait is None else functools.partial(on_wait, device)
            stack.enter_context(device_lock(lock_dir, device, told))
        yield
