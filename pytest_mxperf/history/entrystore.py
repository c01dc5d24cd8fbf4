"""Where entries are kept: a JSON Lines file on a dedicated git branch (default), or in a
local directory.

The branch (``mxperf-history``, one file ``history.jsonl``) is read and written with git
plumbing only (``hash-object``, ``mktree``, ``commit-tree``, ``update-ref``, ``push``): the
user's working tree, index and checked-out branch are never touched. With a remote (default
``origin``, when the repository has one) an ``add`` fetches the branch, writes the union of its
lines and the new ones on top of it, and pushes; a push that loses a race with another job is
fetched again, re-applied and retried. Every write is a new commit or an atomic rename, so a
job that dies half-way leaves what was stored before it as it was.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from pytest_mxperf.history.entries import Entry, EntryError, parse_lines, to_text, union
from pytest_mxperf.paired.gitcmd import WorktreeError, git
from pytest_mxperf.system import files, locks

FILE = "history.jsonl"
DEFAULT_BRANCH = "mxperf-history"
#: Attempts at pushing before an ``add`` gives up (each re-fetches and re-applies).
PUSH_ATTEMPTS = 8
#: The identity of the history branch's commits (a data branch: no user's name in it).
_IDENTITY = {
    "GIT_AUTHOR_NAME": "mxperf history",
    "GIT_AUTHOR_EMAIL": "mxperf-history@users.noreply.invalid",
    "GIT_COMMITTER_NAME": "mxperf history",
    "GIT_COMMITTER_EMAIL": "mxperf-history@users.noreply.invalid",
}


class StoreError(Exception):
    """A store that cannot be read or written; the message says which and why."""


@dataclass(frozen=True)
class DirStore:
    """``DIR/history.jsonl``, rewritten atomically under a lock."""

    path: Path

    def describe(self) -> str:
        return f"directory {self.path}"

    def read(self) -> list[Entry]:
        file = self.path / FILE
        if not file.exists():
            return []
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8
            raise StoreError(f"cannot read {file}: {exc}") from None
        return parse_lines(text, str(file))

    def add(self, new: list[Entry]) -> int:
        with locks.exclusive(self.path / f".{FILE}.lock"):
            old = self.read()
            merged = union(old, new)
            if len(merged) != len(old):
                files.write_text_atomic(self.path / FILE, to_text(merged))
        return len(merged) - len(old)


@dataclass(frozen=True)
class GitStore:
    """``history.jsonl`` on ``branch`` of the repository at ``repo``, pushed to ``remote``."""

    repo: Path
    branch: str = DEFAULT_BRANCH
    remote: str | None = None
    #: False: a read takes the branch as last fetched (``refs/remotes/REMOTE/BRANCH``, e.g. by
    #: ``actions/checkout`` with ``fetch-depth: 0``) and asks the remote for nothing, so a job
    #: step without credentials can read it. An ``add`` always fetches: it must push on top.
    fetch: bool = True

    def describe(self) -> str:
        where = f" (pushed to {self.remote})" if self.remote else ""
        return f"branch {self.branch}{where}"

    def _git(self, *args: str, check: bool = True, stdin: str | None = None) -> str:
        env = {**os.environ, **_IDENTITY}
        if stdin is None:
            return git(self.repo, *args, env=env, check=check).stdout.strip()
        try:  # writing objects: a failure is the store's
            return git(self.repo, *args, env=env, input=stdin).stdout.strip()
        except WorktreeError as exc:
            raise StoreError(f"git {args[0]} failed: {exc}") from None

    @property
    def _ref(self) -> str:
        return f"refs/remotes/{self.remote}/{self.branch}" if self.remote else self._local

    @property
    def _local(self) -> str:
        return f"refs/heads/{self.branch}"

    def _fetch(self) -> None:
        if self.remote is None:
            return
        spec = f"+refs/heads/{self.branch}:{self._ref}"
        done = git(self.repo, "fetch", "-q", self.remote, spec, check=False)
        if done.returncode != 0 and "couldn't find remote ref" not in done.stderr:
            raise StoreError(
                f"cannot fetch {self.branch} from {self.remote}: {done.stderr.strip()}"
            )

    def _tip(self) -> str | None:
        sha = self._git("rev-parse", "--verify", "--quiet", self._ref, check=False)
        return sha or None

    def _entries_at(self, tip: str | None) -> list[Entry]:
        if tip is None:
            return []
        done = git(self.repo, "cat-file", "-p", f"{tip}:{FILE}", check=False)
        if done.returncode != 0:
            raise StoreError(f"branch {self.branch} at {tip[:10]} holds no {FILE}")
        return parse_lines(done.stdout, f"{self.branch}:{FILE}")

    def read(self) -> list[Entry]:
        if self.fetch:
            self._fetch()
        return self._entries_at(self._tip())

    def _commit(self, tip: str | None, merged: list[Entry], added: int) -> str:
        blob = self._git("hash-object", "-w", "--stdin", stdin=to_text(merged))
        tree = self._git("mktree", stdin=f"100644 blob {blob}\t{FILE}\n")
        parents = ["-p", tip] if tip else []
        message = f"mxperf history: {added} entr{'y' if added == 1 else 'ies'}"
        return self._git("commit-tree", tree, *parents, "-m", message)

    def add(self, new: list[Entry]) -> int:
        for attempt in range(PUSH_ATTEMPTS):
            self._fetch()
            tip = self._tip()
            old = self._entries_at(tip)
            merged = union(old, new)
            added = len(merged) - len(old)
            if added == 0:
                return 0
            commit = self._commit(tip, merged, added)
            if self._publish(commit, tip):
                return added
            time.sleep(0.2 * (attempt + 1))  # another job pushed first: fetch and re-apply
        raise StoreError(f"gave up pushing {self.branch} after {PUSH_ATTEMPTS} lost races")

    def _publish(self, commit: str, tip: str | None) -> bool:
        """Move the branch to ``commit`` if it is still at ``tip``; False if another job moved
        it first (its push rejected, or the local ref changed under us)."""
        if self.remote is not None:
            done = git(self.repo, "push", "-q", self.remote, f"{commit}:{self._local}", check=False)
            if done.returncode != 0:
                if "rejected" in done.stderr or "fetch first" in done.stderr:
                    return False
                raise StoreError(f"cannot push {self.branch}: {done.stderr.strip()}")
            self._git("update-ref", self._ref, commit)
            return True
        done = git(self.repo, "update-ref", self._local, commit, tip or "0" * 40, check=False)
        return done.returncode == 0


Store = Union[DirStore, GitStore]


def open_store(
    spec: str | None, repo: Path, remote: str | None = "origin", fetch: bool = True
) -> Store:
    """The store ``spec`` names: ``git:BRANCH`` (or nothing: ``git:mxperf-history``) in the
    repository at ``repo``, pushed to ``remote`` when the repository has it (``fetch``: reads
    fetch it first, `GitStore.fetch`); anything else is a directory."""
    if spec is None or spec.startswith("git:"):
        branch = (spec or "")[4:] or DEFAULT_BRANCH
        try:
            top = git(repo, "rev-parse", "--show-toplevel").stdout.strip()
        except WorktreeError as exc:
            raise StoreError(f"the history branch needs a git repository: {exc}") from None
        remotes = git(Path(top), "remote").stdout.split()
        return GitStore(Path(top), branch, remote if remote in remotes else None, fetch)
    return DirStore(Path(spec))


def read_store(store: Store) -> list[Entry]:
    try:
        return store.read()
    except (EntryError, WorktreeError) as exc:
        raise StoreError(f"{store.describe()}: {exc}") from None
