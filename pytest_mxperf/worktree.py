"""REV's code in a git worktree: never the user's tree, removed afterwards, also after Ctrl-C."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path


class WorktreeError(RuntimeError):
    """A revision that cannot be checked out; the message names it."""


def _git(repo: Path, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise WorktreeError(f"git {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def resolve_rev(repo_root: str | Path, rev: str) -> str:
    """The full sha of ``rev``, or `WorktreeError` naming it."""
    try:
        return _git(Path(repo_root), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except WorktreeError:
        raise WorktreeError(f"unknown revision {rev!r} in {repo_root}") from None


@contextlib.contextmanager
def checkout(repo_root: str | Path, sha: str, parent: str | Path) -> Iterator[Path]:
    """A detached worktree of ``sha`` under ``parent`` for the ``with`` block; removed (and
    unregistered) on the way out, whatever ended the block. Registrations left by a killed
    earlier run are pruned first. Submodules are not checked out."""
    repo = Path(repo_root)
    path = Path(parent) / f"rev-{sha[:12]}"
    _git(repo, "worktree", "prune")
    try:
        _git(repo, "worktree", "add", "--detach", "--force", str(path), sha)
        yield path
    finally:
        with contextlib.suppress(WorktreeError, subprocess.SubprocessError, OSError):
            _git(repo, "worktree", "remove", "--force", str(path))
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(WorktreeError, subprocess.SubprocessError, OSError):
            _git(repo, "worktree", "prune")
