"""The one way this plugin writes a file others read: atomically (a temporary file in the same
directory, flushed and fsynced, then ``os.replace``), so a reader sees the old file or the new,
never half of one, whatever interrupts the write; a failed write leaves no temporary behind."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0o022)  # the only portable way to read it is to set it, then restore it
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, creating its folder; the file gets the mode any
    file the user writes gets (mkstemp's 0600 would hide a baseline or report from others)."""
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
