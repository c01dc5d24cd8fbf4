"""The plugin's roots in the shared temporary directory (``<tmp>/pytest-mxperf-<uid>``, the
worktree and image caches): made private to the user, and refused when someone else could have
put something there, as pip and pytest refuse theirs.

A root another user made first (mode 0777, say) would hold this user's lock files, REV's
worktree and the fork servers' sockets inside a directory they control: `private_dir` refuses
it, naming the path and its owner, rather than trusting it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


class UnsafeTempDir(Exception):
    """A shared temporary root that is not this user's alone; the message names it."""


def _user(uid: int) -> str:
    with contextlib.suppress(Exception):  # no passwd entry for the uid (some containers)
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    return f"uid {uid}"


def private_dir(path: Path) -> Path:
    """``path`` made (mode 0700) if missing, then checked: a directory, not a symlink, owned by
    this user and not writable by group or others.

    :raises UnsafeTempDir: it fails a check; the message says what to do.
    """
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    fix = "remove it (or set TMPDIR to a directory of yours) and run again"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise UnsafeTempDir(f"the temporary directory {path} is {kind}: {fix}")
    uid = os.getuid() if hasattr(os, "getuid") else info.st_uid
    if info.st_uid != uid:
        raise UnsafeTempDir(
            f"the temporary directory {path} is owned by {_user(info.st_uid)}, not by this user "
            f"({_user(uid)}): another user controls what it holds; {fix}"
        )
    if info.st_mode & 0o022:
        raise UnsafeTempDir(
            f"the temporary directory {path} is writable by group or others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): anyone may have put files there; {fix}, or "
            f"make it private with chmod 700 {path}"
        )
    return path
