"""A checkout of another revision's code in a git worktree that is never the user's tree.

Paired runs measure the code at a revision next to the working tree. The revision is checked out
with ``git worktree add --detach`` into a cache directory of ours, so the user's files, index and
branch are never touched. Submodules are out of scope: they are not initialised in the worktree
(a repository whose benchmarks need submodule code cannot be paired yet).

Where the worktrees go (:func:`default_cache_dir`): under the system temp directory, outside the
repository, because a worktree inside the repository would show as untracked files, could be
collected by ``pytest`` or linted by tools run at the root, and would let pytest pick up the
outer tree's ``conftest.py`` files when the revision has no ini file of its own.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
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


def _git(
    cwd: Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    # Hooks of the user's repository (post-checkout and friends) must not run for our
    # throwaway checkouts: they may be slow, print, or prompt.
    argv = ["git", "-c", f"core.hooksPath={os.devnull}", *args]
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=_git_env(env),
            stdin=subprocess.DEVNULL,
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
    inside = _git(root, "rev-parse", "--is-inside-work-tree", env=env, check=False)
    if inside.returncode != 0:
        raise WorktreeError(f"{root} is not in a git repository: {inside.stderr.strip()}")
    done = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", env=env, check=False)
    sha = done.stdout.strip()
    if done.returncode != 0 or not sha:
        raise WorktreeError(f"unknown revision {rev!r} in {root}")
    return sha


def default_cache_dir(repo_root: str | Path) -> Path:
    """``<tmp>/pytest-mxperf-cache-<user>/worktrees/<repo name>-<hash of its path>``.

    Per user (temp directories are shared) and per repository (two clones never share a
    worktree, whose registration lives in one repository).
    """
    root = Path(repo_root).resolve()
    try:
        user = getpass.getuser()
    except Exception:  # no name for this uid (some containers): still per uid where possible
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:10]
    return (
        Path(tempfile.gettempdir())
        / f"pytest-mxperf-cache-{user}"
        / "worktrees"
        / f"{root.name}-{digest}"
    )


def remove_empty(path: str | Path, levels: int = 1) -> None:
    """Remove ``path`` and then up to ``levels - 1`` of its parents, each only while it is
    empty (the cache directories a run made and left with nothing in them)."""
    here = Path(path)
    for _ in range(levels):
        try:
            here.rmdir()
        except OSError:  # not empty, or gone, or not ours to remove: stop there
            return
        here = here.parent


def _registered(repo_root: Path, env: Mapping[str, str] | None) -> dict[Path, str | None]:
    """Registered worktrees of the repository: resolved path -> checked-out sha."""
    out = _git(repo_root, "worktree", "list", "--porcelain", env=env).stdout
    found: dict[Path, str | None] = {}
    path: Path | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree ") :]).resolve()
            found[path] = None
        elif line.startswith("HEAD ") and path is not None:
            found[path] = line[len("HEAD ") :]
    return found


def _is_clean(path: Path, env: Mapping[str, str] | None) -> bool:
    # Ignored files (caches, build output) are allowed; tracked changes and stray
    # untracked files are not: they would be measured as if they were the revision's code.
    done = _git(path, "status", "--porcelain", "--untracked-files=all", env=env, check=False)
    return done.returncode == 0 and not done.stdout.strip()


def _remove(repo_root: Path, path: Path, env: Mapping[str, str] | None) -> None:
    """Remove a worktree of ours: its registration and its directory, whatever state it is in."""
    _git(repo_root, "worktree", "remove", "--force", "--force", str(path), env=env, check=False)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    _git(repo_root, "worktree", "prune", env=env, check=False)


def list_worktrees(repo_root: str | Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Paths of the repository's linked worktrees (the main tree excluded)."""
    root = Path(repo_root)
    top = Path(_git(root, "rev-parse", "--show-toplevel", env=env).stdout.strip()).resolve()
    return [p for p in _registered(root, env) if p != top]


@contextlib.contextmanager
def checkout(
    repo_root: str | Path,
    sha: str,
    cache_dir: str | Path,
    *,
    keep: bool = False,
    env: Mapping[str, str] | None = None,
) -> Iterator[Path]:
    """Check out ``sha`` (detached) into ``cache_dir/<sha[:12]>`` and yield that path.

    A clean worktree of that sha already there is reused; a dirty one, or one at another
    commit, is replaced. Registrations whose directories vanished (a run killed earlier, a
    cleaned temp directory) are pruned first. On leaving, the worktree is removed, also on an
    exception or KeyboardInterrupt; ``keep=True`` keeps a completed checkout as a cache for the
    next run (a half-made one is removed all the same).

    :param sha: a full commit sha, as :func:`resolve_rev` returns.
    :param cache_dir: a directory of ours, e.g. :func:`default_cache_dir`; it is created.
    :raises WorktreeError: git failed, or ``cache_dir/<sha[:12]>`` exists and is not a worktree
        (it is left alone: it may be someone's files).
    """
    root = Path(repo_root).resolve()
    _check_sha(sha)
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    target = (cache / sha[:12]).resolve()
    _git(root, "worktree", "prune", env=env)

    registered = _registered(root, env)
    if target in registered:
        if registered[target] == sha and target.is_dir() and _is_clean(target, env):
            # Reused: keep it afterwards only if asked, like a fresh one.
            yield from _hold(root, target, keep, env, created=False)
            return
        _remove(root, target, env)
    elif target.exists():
        if not _looks_like_ours(target):
            raise WorktreeError(
                f"{target} exists and is not a git worktree; remove it or choose another "
                "cache directory"
            )
        shutil.rmtree(target)
    yield from _hold(root, target, keep, env, created=True, sha=sha)


def _check_sha(sha: str) -> None:
    if len(sha) not in (40, 64) or any(c not in "0123456789abcdef" for c in sha):
        raise WorktreeError(f"expected a full commit sha (see resolve_rev), got {sha!r}")


def _looks_like_ours(path: Path) -> bool:
    # A leftover of ours is an empty directory or one with a worktree's ".git" file.
    return (path / ".git").is_file() or (path.is_dir() and not any(path.iterdir()))


def _hold(
    root: Path,
    target: Path,
    keep: bool,
    env: Mapping[str, str] | None,
    *,
    created: bool,
    sha: str = "",
) -> Iterator[Path]:
    complete = not created
    try:
        if created:
            _git(root, "worktree", "add", "--detach", "--quiet", str(target), sha, env=env)
            complete = True
        yield target
    finally:
        # Also for KeyboardInterrupt: the with-block's body or `git worktree add` itself.
        if not (keep and complete):
            _remove(root, target, env)


def remove_all(
    repo_root: str | Path, cache_dir: str | Path, env: Mapping[str, str] | None = None
) -> int:
    """Remove every worktree of the repository under ``cache_dir``; return how many.

    For a "clear the cache" command; :func:`checkout` itself never needs it.
    """
    root = Path(repo_root).resolve()
    cache = Path(cache_dir).resolve()
    count = 0
    for path in list_worktrees(root, env):
        if cache in path.parents:
            _remove(root, path, env)
            count += 1
    return count
