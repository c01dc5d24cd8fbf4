"""Commit facts and ancestry from git (GitPython), CI variables first. Never raises for "no git"."""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: (sha variable, branch variables) of common CI systems, checked in this order.
CI_VARIABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PYTEST_MXPERF_COMMIT", ("PYTEST_MXPERF_BRANCH",)),
    ("GITHUB_SHA", ("GITHUB_HEAD_REF", "GITHUB_REF_NAME")),
    ("CI_COMMIT_SHA", ("CI_COMMIT_REF_NAME",)),
    ("BUILDKITE_COMMIT", ("BUILDKITE_BRANCH",)),
    ("CIRCLE_SHA1", ("CIRCLE_BRANCH",)),
    ("TRAVIS_COMMIT", ("TRAVIS_BRANCH",)),
    ("GIT_COMMIT", ("GIT_BRANCH", "BRANCH_NAME")),
)


@dataclass(frozen=True)
class CommitInfo:
    sha: str | None
    date: str | None
    branch: str | None
    dirty: bool | None
    source: str
    repo_root: str | None = None
    shallow: bool = False
    #: The commit's tree (git's hash of its files): what a clean run measured, whatever the
    #: commit's sha (a pull request's test merge commit and the commit it is merged as share it).
    tree: str | None = None

    @property
    def short(self) -> str:
        return (self.sha or "unknown")[:10]


#: A commit sha as baseline files are named by it (abbreviated or full, SHA-1 or SHA-256).
SHA = re.compile(r"[0-9a-f]{7,64}")


def env_commit_problem(commit: CommitInfo) -> str | None:
    """Why the commit a CI variable named (``PYTEST_MXPERF_COMMIT``, ``GITHUB_SHA``, ...) cannot
    be this run's, or None: neither a sha nor a revision git resolved here. Said before anything
    is measured; baselines are stored under, and found by, the commit's sha."""
    if not commit.source.startswith("env:") or not commit.sha or SHA.fullmatch(commit.sha):
        return None
    name = commit.source[len("env:") :]
    return (
        f"mxperf: {name}={commit.sha!r} names no commit: it is not a sha (7 to 64 lowercase hex "
        "digits) nor a revision of this repository; baselines are stored and found by the "
        f"commit's sha: set {name} to one, or unset it to take the commit from git"
    )


def _repo(path: str | Path) -> Any:
    try:
        import git
    except ImportError:  # pragma: no cover - GitPython is a dependency
        return None
    try:
        return git.Repo(path, search_parent_directories=True)
    except Exception:  # no repository, or git missing: both mean "no history"
        return None


def _iso(ts: int) -> str:
    return _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc).isoformat()


def detect(path: str | Path, env: Mapping[str, str], exclude: tuple[str, ...] = ()) -> CommitInfo:
    """Commit facts for ``path``: CI variables for sha/branch, git for the rest.

    :param exclude: paths (absolute, or relative to the repository root) ignored by the dirty
        check, such as the baseline directory that ``--mxperf-update`` writes into.
    """
    sha = branch = None
    source = "git"
    for sha_var, branch_vars in CI_VARIABLES:
        if env.get(sha_var):
            sha, source = env[sha_var].strip(), f"env:{sha_var}"
            branch = next((env[b] for b in branch_vars if env.get(b)), None)
            break
    repo = _repo(path)
    if repo is None:
        return CommitInfo(sha, None, branch, None, source if sha else "none")
    with repo:  # close() ends git's persistent cat-file processes (else: ResourceWarnings)
        return _detect(repo, sha, branch, source, exclude)


def _detect(
    repo: Any, sha: str | None, branch: str | None, source: str, exclude: tuple[str, ...]
) -> CommitInfo:
    root = str(repo.working_tree_dir)
    date = tree = None
    try:
        head = repo.head.commit
        commit = repo.commit(sha) if sha else head
        sha = commit.hexsha
        date = _iso(commit.committed_date)
        # The tree of the commit checked out only: a CI variable may name another commit.
        tree = commit.tree.hexsha if commit.hexsha == head.hexsha else None
    except Exception:
        pass  # a CI sha not present in this clone, or an empty repository
    if branch is None:
        try:
            branch = repo.active_branch.name
        except Exception:
            branch = None  # detached HEAD
    try:
        args = ["--porcelain", "--untracked-files=no", *_pathspec(root, exclude)]
        dirty: bool | None = bool(repo.git.status(*args).strip())
    except Exception:
        dirty = None
    shallow = (Path(repo.git_dir) / "shallow").exists()
    return CommitInfo(sha, date, branch, dirty, source, root, shallow, tree)


def _pathspec(root: str, exclude: tuple[str, ...]) -> list[str]:
    """``-- .`` and an ``:(exclude)`` for each of ``exclude`` (absolute, or relative to
    ``root``) inside the repository (one outside it has nothing to exclude)."""
    spec = ["--", "."]
    for path in exclude:
        rel = os.path.relpath(path, root) if os.path.isabs(path) else path
        if not rel.startswith(".."):
            spec.append(f":(exclude){rel}")
    return spec


def ancestry(repo_root: str | None, sha: str | None, limit: int = 100_000) -> dict[str, int] | None:
    """Every ancestor of ``sha`` (itself included) with its distance in commits, or None.

    The dict is in ``--topo-order`` (descendants before their ancestors), so callers can break
    distance ties in favour of the later commit on a merged branch.
    """
    if not repo_root or not sha:
        return None
    repo = _repo(repo_root)
    if repo is None:
        return None
    try:
        lines = repo.git.rev_list(
            "--topo-order", "--parents", f"--max-count={limit}", sha
        ).splitlines()
    except Exception:
        return None
    finally:
        repo.close()
    parents = {}
    for line in lines:
        parts = line.split()
        parents[parts[0]] = parts[1:]
    distance = {sha: 0}
    queue = deque([sha])
    while queue:
        current = queue.popleft()
        for parent in parents.get(current, []):
            if parent not in distance:
                distance[parent] = distance[current] + 1
                queue.append(parent)
    return {commit: distance[commit] for commit in parents if commit in distance}


def rev_parse(repo_root: str | None, rev: str) -> str | None:
    """Full sha of ``rev`` in the repository, or None when it cannot be resolved or its commit
    is not in this clone (a shallow clone names its oldest commits' parents, ``HEAD~1`` at
    depth 1, without holding them: `git worktree add` then fails with "invalid reference")."""
    repo = _repo(repo_root) if repo_root else None
    if repo is None:
        return None
    try:
        sha = str(repo.commit(rev).hexsha)
        repo.git.cat_file("-e", f"{sha}^{{commit}}")
        return sha
    except Exception:
        return None
    finally:
        repo.close()


#: What to do when a revision is missing from a shallow clone.
DEEPEN = (
    "deepen the clone: git fetch --deepen N (N more commits of history), or fetch all of it "
    "(git fetch --unshallow; in GitHub Actions, actions/checkout with fetch-depth: 0)"
)


def is_shallow(repo_root: str | None) -> bool:
    """Whether the repository is a shallow clone (``git rev-parse --is-shallow-repository``)."""
    repo = _repo(repo_root) if repo_root else None
    if repo is None:
        return False
    try:
        return bool(repo.git.rev_parse("--is-shallow-repository").strip() == "true")
    except Exception:
        return False
    finally:
        repo.close()


def log_oneline(
    repo_root: str | None, base: str, head: str, paths: list[str], limit: int = 10
) -> tuple[list[str], int] | None:
    """``git log --oneline base..head -- paths``: at most ``limit`` lines and how many commits
    there are in all; None when git cannot answer (no repository, an unknown commit)."""
    repo = _repo(repo_root) if repo_root else None
    if repo is None:
        return None
    try:
        text = repo.git.log("--oneline", "--no-decorate", f"{base}..{head}", "--", *paths)
    except Exception:
        return None
    finally:
        repo.close()
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[:limit], len(lines)


def differs_from(
    repo_root: str | None, sha: str, exclude: tuple[str, ...] = ()
) -> list[str] | None:
    """Paths where the working tree differs from commit ``sha``: tracked files changed, added
    or removed since it (staged or not), and untracked files git does not ignore, outside the
    ``exclude`` paths (absolute, or relative to the root); [] for the same tree, None when git
    cannot tell."""
    repo = _repo(repo_root) if repo_root else None
    if repo is None:
        return None
    spec = _pathspec(str(repo.working_tree_dir), exclude)
    try:
        tracked = repo.git.diff("--name-only", "--no-renames", sha, *spec).splitlines()
        untracked = repo.git.ls_files("--others", "--exclude-standard", *spec).splitlines()
    except Exception:
        return None
    finally:
        repo.close()
    return sorted({p for p in tracked + untracked if p})
