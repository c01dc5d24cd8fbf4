"""An environment per revision for paired runs (like asv's install command): a venv built once
per revision and dependency files, reused while complete, rebuilt when a build was cut short."""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

#: Files whose content decides what a revision installs.
DEPENDENCY_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "requirements.txt")
COMPLETE = ".mxperf-env-complete"


class EnvError(RuntimeError):
    """An environment that could not be built; the message has the command's output tail."""


def env_key(command: str, tree: Path) -> str:
    """A hash of the command and the revision's dependency files."""
    h = hashlib.sha256(command.encode())
    for name in DEPENDENCY_FILES + tuple(sorted(p.name for p in tree.glob("requirements*.txt"))):
        path = tree / name
        if path.is_file():
            h.update(name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def ensure_env(command: str, tree: Path, cache: Path, label: str, timeout: float = 1800) -> Path:
    """The python of the environment for ``tree`` (built with ``command`` if needed).

    ``command`` is split like a shell line; ``{python}``, ``{venv}`` and ``{wt}`` are replaced
    by the venv's python, the venv and the revision's worktree.
    """
    venv = cache / f"{label[:12]}-{env_key(command, tree)}"
    python = venv / "bin" / "python"
    if (venv / COMPLETE).is_file() and python.exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)  # a half-built env is never used
    cache.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [part.format(python=python, venv=venv, wt=tree) for part in shlex.split(command)],
    ]
    for argv in steps:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvError(f"building the environment for {label}: {argv[0]}: {exc}") from None
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
            raise EnvError(f"building the environment for {label} failed ({argv[0]}):\n{tail}")
    (venv / COMPLETE).write_text(command + "\n", encoding="utf-8")
    return python
