"""A checkout of another revision's code in a git worktree that is never the user's tree.

Paired runs measure the code at a revision next to the working tree. The revision is checked out
with ``git worktree add --detach`` into a cache directory of ours, so the user's files, index and
branch are never touched. Submodules are out of scope: they are not initialised in the worktree
(a repository whose benchmarks need submodule code cannot be paired yet).

Where the worktrees go (:func:`default_cache_dir`): under the system temp directory, outside the
repository, because a worktree inside the repository would show as untracked files, could be
collected by ``pytest`` or linted by tools run at the root, and would let pytest pick up the
outer tree's ``conftest.py`` files when the revision has no ini file of its own.

The git commands themselves (bounded, without the user's hooks) are `gitcmd`'s.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from pytest_mxperf.paired import gitcmd
from pytest_mxperf.system import tempdirs


def cache_root() -> Path:
    """``<tmp>/pytest-mxperf-cache-<user>``, made private to the user and checked to be theirs
    alone (`tempdirs.private_dir` raises `tempdirs.UnsafeTempDir` otherwise): REV's worktree
    and environment are checked out and run from under it."""
    try:
        user = getpass.getuser()
    except Exception:  # no name for this uid (some containers): still per uid where possible
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return tempdirs.private_dir(Path(tempfile.gettempdir()) / f"pytest-mxperf-cache-{user}")


def default_cache_dir(repo_root: str | Path) -> Path:
    """``<tmp>/pytest-mxperf-cache-<user>/worktrees/<repo name>-<hash of its path>``.

    Per user (temp directories are shared; the root is `cache_root`, checked) and per
    repository (two clones never share a worktree, whose registration lives in one repository).
    """
    root = Path(repo_root).resolve()
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:10]
    return cache_root() / "worktrees" / f"{root.name}-{digest}"


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


def _is_clean(path: Path, env: Mapping[str, str] | None) -> bool:
    # Ignored files (caches, build output) are allowed; tracked changes and stray
    # untracked files are not: they would be measured as if they were the revision's code.
    done = gitcmd.git(path, "status", "--porcelain", "--untracked-files=all", env=env, check=False)
    return done.returncode == 0 and not done.stdout.strip()


def _remove(repo_root: Path, path: Path, env: Mapping[str, str] | None) -> None:
    """Remove a worktree of ours: its registration and its directory, whatever state it is in."""
    gitcmd.git(
        repo_root, "worktree", "remove", "--force", "--force", str(path), env=env, check=False
    )
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    _kept_path(path).unlink(missing_ok=True)
    gitcmd.git(repo_root, "worktree", "prune", env=env, check=False)


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

    :param sha: a full commit sha, as `gitcmd.resolve_rev` returns.
    :param cache_dir: a directory of ours, e.g. :func:`default_cache_dir`; it is created.
    :raises WorktreeError: git failed, or ``cache_dir/<sha[:12]>`` exists and is not a worktree
        (it is left alone: it may be someone's files).
    """
    root = Path(repo_root).resolve()
    _check_sha(sha)
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    target = (cache / sha[:12]).resolve()
    gitcmd.git(root, "worktree", "prune", env=env)
    # Worktrees of runs killed earlier (this sha's is reused or replaced below).
    sweep_stale(root, cache, env, spare=target)
    with _in_use(target):
        yield from _checkout(root, sha, target, keep, env)


def _checkout(
    root: Path, sha: str, target: Path, keep: bool, env: Mapping[str, str] | None
) -> Iterator[Path]:
    registered = gitcmd.registered(root, env)
    if target in registered:
        if registered[target] == sha and target.is_dir() and _is_clean(target, env):
            # Reused: keep it afterwards only if asked, like a fresh one.
            yield from _hold(root, target, keep, env, created=False)
            return
        _remove(root, target, env)
    elif target.exists():
        if not _looks_like_ours(target):
            raise gitcmd.WorktreeError(
                f"{target} exists and is not a git worktree; remove it or choose another "
                "cache directory"
            )
        shutil.rmtree(target)
    yield from _hold(root, target, keep, env, created=True, sha=sha)


def _lock_path(path: Path) -> Path:
    return path.parent / f"{path.name}.lock"


def _kept_path(path: Path) -> Path:
    return path.parent / f"{path.name}.kept"


@contextlib.contextmanager
def _in_use(target: Path) -> Iterator[None]:
    """A shared ``flock`` on ``<target>.lock`` while a run uses the worktree (it dies with the
    process, SIGKILL included): `sweep_stale` removes only worktrees nobody holds. The lock
    file goes too when no other run holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock: nothing is swept either
        yield
        return
    lock = _lock_path(target)
    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)
        try:
            yield
        finally:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                pass  # another run uses it: its lock file stays
            else:
                lock.unlink(missing_ok=True)


def sweep_stale(
    repo_root: str | Path,
    cache_dir: str | Path,
    env: Mapping[str, str] | None = None,
    spare: Path | None = None,
) -> list[Path]:
    """Remove this repository's worktrees under ``cache_dir`` that no live run holds (see
    `_in_use`) and none kept on purpose (``keep=True``): those a run killed by SIGKILL (or
    one that could not clean up) left registered.
    ``spare``: one to leave alone. Returns them."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        return []
    root = Path(repo_root).resolve()
    cache = Path(cache_dir).resolve()
    removed = []
    for path in gitcmd.list_worktrees(root, env):
        if path.parent != cache or path == spare or _kept_path(path).exists():
            continue
        lock = _lock_path(path)
        with open(lock, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # in use by a live run
            _remove(root, path, env)
            lock.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _check_sha(sha: str) -> None:
    if len(sha) not in (40, 64) or any(c not in "0123456789abcdef" for c in sha):
        raise gitcmd.WorktreeError(f"expected a full commit sha (see resolve_rev), got {sha!r}")


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
            gitcmd.git(root, "worktree", "add", "--detach", "--quiet", str(target), sha, env=env)
            complete = True
        yield target
    finally:
        # Also for KeyboardInterrupt: the with-block's body or `git worktree add` itself.
        if not (keep and complete):
            _remove(root, target, env)
        else:  # kept on purpose: not a killed run's leftover for `sweep_stale`
            _kept_path(target).touch()
