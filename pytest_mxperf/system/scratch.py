"""Temporary directories a killed run does not leave behind for good.

Each is made under one directory per user (``<tmp>/pytest-mxperf-<uid>/scratch``, private to
the user) and named by the pid of the process that made it (``mxperf-pair-<pid>-XXXXXXXX``).
A run removes its own on the way out; one killed by SIGKILL cannot, so every new one first
removes those whose process is gone (`sweep`). And the ``/tmp/pymp-*`` directories of the
worker processes a measured data loader forks are one directory of the measuring process's
(`share_worker_tempdir`), which it removes when it exits; one a killed process left is
removed by the next run (`sweep_worker_tempdirs`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pytest_mxperf.system import locks

_OWNED = re.compile(r"^mxperf-[a-z]+-(\d+)-")


def root(base: str | Path | None = None) -> Path:
    """``scratch`` in this user's machine-wide directory (`locks.machine_lock_dir`), private
    to the user."""
    path = locks.machine_lock_dir(base) / "scratch"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts: it may be ours in a
    container that maps users)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(where: Path) -> list[Path]:
    """Remove the directories under ``where`` whose maker's pid is gone; return them."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in where.iterdir():
            match = _OWNED.match(entry.name)
            if match and entry.is_dir() and not alive(int(match.group(1))):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


@contextlib.contextmanager
def directory(prefix: str, base: str | Path | None = None) -> Iterator[Path]:
    """A new directory ``<root>/mxperf-<prefix>-<pid>-XXXXXXXX``, removed on leaving (also on
    KeyboardInterrupt); those of processes that are gone are removed first."""
    where = root(base)
    sweep(where)
    path = Path(tempfile.mkdtemp(prefix=f"mxperf-{prefix}-{os.getpid()}-", dir=where))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def share_worker_tempdir() -> str | None:
    """Make this process's `multiprocessing` temporary directory now (a ``pymp-*`` under the
    temporary root) and return it. Every process forked from here on (a Gluon DataLoader's
    workers, which MXNet starts when the loader is made) inherits it rather than making its
    own; a worker that its pool ends with ``terminate()``, as a DataLoader ends them, never
    removes its own, so each loader with workers left one ``/tmp/pymp-*`` behind (4 in one run
    of this repository's pipeline cases). This process removes the shared one when it exits; a
    fork server's children, which exit with ``os._exit``, leave it to the server. None when the
    temporary root takes no directory (the workers then try, and say why, themselves).

    A process killed (SIGKILL, an MXNet abort) cannot remove its own: it is marked with its
    maker's pid (`OWNER_MARK`), and the ones whose maker is gone are removed first
    (`sweep_worker_tempdirs`)."""
    import multiprocessing.util

    sweep_worker_tempdirs()
    try:
        made = multiprocessing.util.get_temp_dir()
    except OSError:
        return None
    with contextlib.suppress(OSError):
        (Path(made) / f"{OWNER_MARK}{_pid_namespace()}-{os.getpid()}").touch()
    return made


#: The name of the empty file that marks a ``pymp-*`` directory with the pid namespace and pid
#: of the process of ours that made it.
OWNER_MARK = ".mxperf-owner-"


def _pid_namespace() -> str:
    """This process's pid namespace (a pid means nothing in another container)."""
    try:
        return os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return "unknown"


def sweep_worker_tempdirs(base: str | Path | None = None) -> list[Path]:
    """Remove the ``pymp-*`` directories under the temporary root that a process of ours made
    (`share_worker_tempdir`'s mark, this user's, in this pid namespace) and that is gone."""
    removed = []
    here, uid = _pid_namespace(), os.getuid() if hasattr(os, "getuid") else None
    with contextlib.suppress(OSError):
        for entry in Path(base or tempfile.gettempdir()).glob("pymp-*"):
            with contextlib.suppress(OSError, ValueError):
                info = entry.lstat()
                if not stat.S_ISDIR(info.st_mode) or (uid is not None and info.st_uid != uid):
                    continue
                marks = [m.name for m in entry.iterdir() if m.name.startswith(OWNER_MARK)]
                if len(marks) != 1:
                    continue
                space, _, pid = marks[0][len(OWNER_MARK) :].rpartition("-")
                if space == here and not alive(int(pid)):
                    shutil.rmtree(entry, ignore_errors=True)
                    removed.append(entry)
    return removed
