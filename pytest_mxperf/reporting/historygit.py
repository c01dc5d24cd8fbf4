"""What git says about the commits a baseline directory stores: the first-parent line of HEAD
(`gitcmd.first_parent`), the other stored commits git knows (GitPython), their dates as UTC
text; no repository, no facts."""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_mxperf.paired.gitcmd import first_parent

#: How far back ``git log --first-parent`` looks.
LOG_LIMIT = 10_000


@dataclass(frozen=True)
class GitCommit:
    sha: str
    date: str
    subject: str


@dataclass(frozen=True)
class GitFacts:
    """What git says about the repository holding the baseline directory."""

    repo_root: str | None
    head: str | None
    #: The first-parent history of HEAD, oldest first.
    first_parent: tuple[GitCommit, ...] = ()
    #: Other stored commits git knows (side branches, merged or not).
    known: tuple[GitCommit, ...] = ()
    #: The repository's name as a published page shows it (`repository_name`), never a path.
    name: str | None = None


def repository_name(working_tree: str, origin: str | None) -> str:
    """The repository's name for a page meant to be published: ``owner/name`` from the URL of
    its ``origin`` remote (no host, no credentials), else the name of its folder; never a path.
    """
    text = (origin or "").strip().rstrip("/")
    local = True
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme != "file":
            local, text = False, rest.partition("/")[2]
        else:
            text = rest
    elif re.match(r"^[^/:]+:(?!/)", text):  # scp-like: [user@]host:owner/name.git
        local, text = False, text.partition(":")[2]
    parts = [p for p in text.split("/") if p]
    if parts and parts[-1].endswith(".git"):
        parts[-1] = parts[-1][: -len(".git")]
    parts = [p for p in parts if p]
    if not parts:
        return Path(working_tree).name
    return "/".join(parts[-1:] if local else parts[-2:])


def utc_text(iso: str) -> str:
    """An ISO date (any offset) as naive UTC text; unparseable input comes back unchanged."""
    try:
        when = _dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    if when.tzinfo is not None:
        when = when.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return when.strftime("%Y-%m-%d %H:%M:%S")


def _parse_log(text: str) -> list[GitCommit]:
    commits = []
    for line in text.splitlines():
        parts = line.split("\x1f")
        if len(parts) == 3:
            commits.append(GitCommit(parts[0], utc_text(parts[1]), parts[2]))
    return commits


_FORMAT = "--format=%H%x1f%cI%x1f%s"


def git_facts(path: Path, shas: Iterable[str] = (), limit: int = LOG_LIMIT) -> GitFacts:
    """First-parent history of HEAD in the repository holding ``path`` (GitPython), and the
    dates and subjects of the other ``shas`` git knows. No repository: empty facts."""
    try:
        import git
    except ImportError:  # pragma: no cover - GitPython is a dependency
        return GitFacts(None, None)
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except Exception:  # no repository, or no git binary: both mean "no history"
        return GitFacts(None, None)
    with repo:  # close() ends git's cat-file processes
        root = str(repo.working_tree_dir)
        try:
            origin: str | None = repo.git.config("--get", "remote.origin.url")
        except Exception:  # no origin remote
            origin = None
        name = repository_name(root, origin)
        line = first_parent(Path(root), limit=limit)  # [] in an empty repository: no HEAD
        if not line:
            return GitFacts(root, None, name=name)
        log = [GitCommit(c.sha, utc_text(c.date), c.subject) for c in line]
        on_line = {c.sha for c in log}
        known = []
        for sha in sorted(set(shas)):
            if sha in on_line:
                continue
            try:
                known += _parse_log(repo.git.show("-s", _FORMAT, sha, "--"))
            except Exception:
                continue  # not in this clone: placed by the file's date
        return GitFacts(root, log[-1].sha, tuple(log), tuple(known), name)
