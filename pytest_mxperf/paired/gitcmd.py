"""Git as REV's worktrees use it: each command bounded in time, without the user's hooks or
the variables that would point it at another repository or index, a failure a `WorktreeError`
that names the command; the revision a name resolves to, the worktrees registered, and the
first-parent line of a revision (`first_parent`: the one reader of it, for the history of paired
ratios, bisect and the history page)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: Seconds allowed for one git command (a checkout of a large tree takes a while).
GIT_TIMEOUT = 600.0

# Variables that would point git at another repository or index than the one we name.
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


class WorktreeError(Exception):
    """A revision cannot be resolved or checked out; the message says which and why."""


def _git_env(env: Mapping[str, str] | None) -> dict[str, str]:
    base = os.environ if env is None else env
    return {k: v for k, v in base.items() if k not in _GIT_LOCATION_VARS}


def git(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``git args`` in ``cwd``, bounded by `GIT_TIMEOUT`, ``input`` on its standard input (none
    by default); with ``check`` a failure raises."""
    # Hooks of the user's repository (post-checkout and friends) must not run for our
    # throwaway checkouts: they may be slow, print, or prompt.
    argv = ["git", "-c", f"core.hooksPath={os.devnull}", *args]
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=_git_env(env),
            **({"stdin": subprocess.DEVNULL} if input is None else {"input": input}),
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
        )
    except FileNotFoundError:
        raise WorktreeError("git is not installed (needed for paired runs)") from None
    except subprocess.TimeoutExpired:
        raise WorktreeError(f"`{' '.join(argv)}` took more than {GIT_TIMEOUT:g} s") from None
    if check and done.returncode != 0:
        raise WorktreeError(
            f"`git {' '.join(args)}` failed in {cwd} (exit {done.returncode}): "
            f"{done.stderr.strip() or done.stdout.strip()}"
        )
    return done


def resolve_rev(repo_root: str | Path, rev: str, env: Mapping[str, str] | None = None) -> str:
    """The full sha of the commit ``rev`` names (a sha, branch, tag, ``HEAD~2``...).

    :raises WorktreeError: "unknown revision 'x'" when it names no commit, or when
        ``repo_root`` is not in a git repository.
    """
    root = Path(repo_root)
    if not rev or rev.startswith("-"):  # never let a revision be read as an option
        raise WorktreeError(f"unknown revision {rev!r} in {root}")
    inside = git(root, "rev-parse", "--is-inside-work-tree", env=env, check=False)
    if inside.returncode != 0:
        raise WorktreeError(f"{root} is not in a git repository: {inside.stderr.strip()}")
    done = git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", env=env, check=False)
    sha = done.stdout.strip()
    if done.returncode != 0 or not sha:
        raise WorktreeError(f"unknown revision {rev!r} in {root}")
    return sha


def registered(repo_root: Path, env: Mapping[str, str] | None) -> dict[Path, str | None]:
    """Registered worktrees of the repository: resolved path -> checked-out sha."""
    out = git(repo_root, "worktree", "list", "--porcelain", env=env).stdout
    found: dict[Path, str | None] = {}
    path: Path | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree ") :]).resolve()
            found[path] = None
        elif line.startswith("HEAD ") and path is not None:
            found[path] = line[len("HEAD ") :]
    return found


def list_worktrees(repo_root: str | Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Paths of the repository's linked worktrees (the main tree excluded)."""
    root = Path(repo_root)
    top = Path(git(root, "rev-parse", "--show-toplevel", env=env).stdout.strip()).resolve()
    return [p for p in registered(root, env) if p != top]


@dataclass(frozen=True)
class LineCommit:
    """A commit of a first-parent line: its full sha, committer date (ISO 8601), subject."""

    sha: str
    date: str
    subject: str


def first_parent(
    repo: Path | None,
    rev: str = "HEAD",
    *,
    since: str | None = None,
    limit: int | None = None,
    check: bool = False,
) -> list[LineCommit]:
    """The first-parent line of ``rev``, oldest first: the commits after ``since`` (``since``
    itself excluded) when given, the newest ``limit`` when given. Where git cannot tell (no
    repository, an unknown revision, an empty repository) ``[]``, or with ``check`` a
    `WorktreeError` that says why."""
    if repo is None or not rev or rev.startswith("-") or (since or "").startswith("-"):
        if check:
            raise WorktreeError(f"no first-parent line of {rev!r} in {repo}")
        return []
    args = ["-c", "log.showSignature=false", "log", "--first-parent", "--format=%H%x1f%cI%x1f%s"]
    args += [f"--max-count={limit}"] if limit is not None else []
    args += [f"{since}..{rev}" if since else rev, "--"]
    done = git(repo, *args, check=check)
    if done.returncode != 0:
        return []
    found = [line.split("\x1f", 2) for line in done.stdout.splitlines()]
    return [LineCommit(*parts) for parts in reversed(found) if len(parts) == 3]
