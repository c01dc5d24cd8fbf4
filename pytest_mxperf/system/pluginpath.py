"""The directory a side or rank process puts first on ``sys.path`` to import this plugin, and
nothing else of this environment.

The plugin's parent directory will not do when the plugin is installed (not editable): it is
this environment's ``site-packages``, so a side running in REV's own environment
(``--mxperf-env-command``) would import this environment's MXNet, numpy and everything else
ahead of its own. Instead a directory per plugin location holds a single link named
``pytest_mxperf`` to the package (``<tmp>/pytest-mxperf-<uid>/plugin/<hash>``); a source tree
is linked the same way, so its tests and conftest files are not importable either.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import pytest_mxperf
from pytest_mxperf.system import locks

NAME = "pytest_mxperf"


def package_dir() -> Path:
    """The directory of the plugin's package as this process imported it."""
    return Path(pytest_mxperf.__file__).resolve().parent


def import_root(base: str | Path | None = None) -> str:
    """A directory holding only a link to the plugin's package (made once, atomically)."""
    package = package_dir()
    digest = hashlib.sha256(str(package).encode()).hexdigest()[:16]
    home = locks.machine_lock_dir(base) / "plugin" / digest
    link = home / NAME
    if link.is_symlink() and link.resolve() == package:
        return str(home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    spare = home / f".{NAME}.{os.getpid()}.{secrets.token_hex(4)}"  # threads of one process too
    spare.symlink_to(package, target_is_directory=True)
    os.replace(spare, link)
    return str(home)
