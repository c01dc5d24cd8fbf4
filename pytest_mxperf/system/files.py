"""The one way this plugin writes a file others read: atomically (a temporary file in the same
directory, flushed and fsynced, then ``os.replace``), so a reader sees the old file or the new,
never half of one, whatever interrupts the write; a failed write leaves no temporary behind.

An output path that is not a regular file is never replaced (`write_text_atomic`): a symlink is
written through (to its target, atomically when that is a regular file), a FIFO or character
device (``/dev/stdout``, a pipe a reader waits on) gets the text by a plain write, and anything
else (a socket, a block device, a directory) is refused with an `OSError`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0o022)  # the only portable way to read it is to set it, then restore it
    os.umask(mask)
    return mask


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def special(path: Path) -> bool | None:
    """How ``path`` is written: None as a regular file (replaced atomically, or created), True
    as a stream (an existing FIFO or character device, through symlinks: written in place).

    :raises OSError: ``path`` (or what its symlink points to) is a directory, a socket or a
        block device: never a file this plugin writes or replaces.
    """
    try:
        mode = os.stat(path).st_mode  # follows symlinks
    except OSError:
        return None  # missing (or a dangling symlink): created
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return True
    kind = _kind(mode)
    raise OSError(errno.EINVAL, f"{kind}, not a file, FIFO or character device", str(path))


def _check_link_owner(link: Path) -> None:
    """Refuse a symlink another user made in a shared sticky directory (``/tmp``), as Linux's
    ``fs.protected_symlinks`` does: it could point this user's output at any file of theirs."""
    folder, own = os.stat(link.parent), os.lstat(link)
    shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    uid = os.getuid() if hasattr(os, "getuid") else own.st_uid
    if shared and own.st_uid not in (uid, folder.st_uid):
        raise OSError(errno.EACCES, "a symlink another user made in a shared directory", str(link))


def _write_stream(path: Path, text: str) -> None:
    """Write to a FIFO or character device in place. A FIFO nobody reads is refused (ENXIO)
    rather than waited on for ever."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a FIFO that no process reads", str(path)) from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, creating its folder; the file gets the mode any
    file the user writes gets (mkstemp's 0600 would hide a baseline or report from others).

    A symlink stays a link: its target gets the text (atomically). A FIFO or character device
    gets it by a plain write; other kinds of file raise `OSError` (see `special`)."""
    if path.is_symlink():
        _check_link_owner(path)
    if special(path):
        _write_stream(path, text)
        return
    path = Path(os.path.realpath(path)) if path.is_symlink() else path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path, data: Any, *, indent: int = 2, allow_nan: bool = False) -> None:
    """``data`` as sorted, indented JSON (plain JSON only unless ``allow_nan``), atomically."""
    text = json.dumps(data, indent=indent, sort_keys=True, allow_nan=allow_nan) + "\n"
    write_text_atomic(path, text)
