"""The stored baselines as a history: per hardware key and case, images/sec over the commits of
the first-parent history of HEAD, with the spread of each commit's runs and the changes marked.

Pure data: reading files and asking git happen here, drawing happens in ``htmlreport``.
Commits that git does not know, or that are off the first-parent line (a side branch, another
clone), are kept and placed by the date stored in their file; nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mxperf import baselines
from pytest_mxperf.baselines import StoredCase
from pytest_mxperf.floors import Floor, floor_for
from pytest_mxperf.options import DEFAULTS
from pytest_mxperf.summary import Row
from pytest_mxperf.verdict import stored_noise

#: A change is marked only beyond this many times the noise of the two commits compared.
NOISE_FACTOR = 2.0
#: Above this threshold the case is too noisy to call a change either way.
MAX_THRESHOLD = 0.5
#: How far back ``git log --first-parent`` looks.
LOG_LIMIT = 10_000


class Mark(str, enum.Enum):
    """What a point says compared with the previous commit on the line."""

    NEW = "new"
    PASS = "pass"
    IMPROVED = "improved"
    REGRESSED = "regressed"
    UNSTABLE = "unstable"
    OOM = "oom"
    BELOW = "below expectation"


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


@dataclass(frozen=True)
class CommitRef:
    """A stored commit as the report places it."""

    sha: str
    date: str  # UTC, "YYYY-MM-DD HH:MM:SS": plotly cannot read UTC offsets
    subject: str
    branch: str
    dirty: bool
    #: Index in the first-parent history of HEAD (0 = oldest), None when not on it.
    position: int | None
    date_source: str  # "git", "file" or "file time"

    @property
    def in_history(self) -> bool:
        return self.position is not None

    @property
    def short(self) -> str:
        return self.sha[:10]


@dataclass(frozen=True)
class Point:
    """One case at one commit."""

    commit: CommitRef
    images_per_sec: float | None  # None: out of memory or no figure
    low: float | None
    high: float | None
    #: What ``low``/``high`` span: the stored run medians, or the blocks' IQR for one run.
    spread_kind: str
    runs: tuple[float, ...]
    noise: float
    change: float | None = None
    threshold: float | None = None
    mark: Mark = Mark.NEW

    @property
    def spread(self) -> float | None:
        if self.low is None or self.high is None:
            return None
        return self.high - self.low


@dataclass(frozen=True)
class CaseHistory:
    hardware: str
    key: str
    model: str
    mode: str
    dtype: str
    batch_size: int
    device: str
    #: First the commits on the line (first-parent order, or by date without git), then the
    #: commits off it, by the date in their file.
    points: tuple[Point, ...]
    floor: float | None = None

    @property
    def line(self) -> tuple[Point, ...]:
        """The compared points: those on the first-parent line, or all when git knows none."""
        if not any(p.commit.in_history for p in self.points):
            return self.points
        return tuple(p for p in self.points if p.commit.in_history)

    @property
    def off_line(self) -> tuple[Point, ...]:
        """Points shown but not compared: commits off the first-parent line."""
        line = self.line
        return tuple(p for p in self.points if p not in line)

    @property
    def latest(self) -> Point:
        """The newest point of the line (the newest point at all when none is on it)."""
        return self.line[-1] if self.line else self.points[-1]

    @property
    def verdict(self) -> Mark:
        latest = self.latest
        rate = latest.images_per_sec
        below = self.floor is not None and rate is not None and rate < self.floor
        if below and latest.mark is not Mark.REGRESSED:
            return Mark.BELOW
        return latest.mark


@dataclass(frozen=True)
class HardwareHistory:
    hardware: str
    cases: tuple[CaseHistory, ...]
    commits: tuple[CommitRef, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class History:
    root: str
    git: GitFacts
    tolerance: float
    hardware: tuple[HardwareHistory, ...]
    notes: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


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
            log = _parse_log(repo.git.log("--first-parent", _FORMAT, f"--max-count={limit}"))
        except Exception:  # an empty repository has no HEAD
            return GitFacts(root, None)
        on_line = {c.sha for c in log}
        known = []
        for sha in sorted(set(shas)):
            if sha in on_line:
                continue
            try:
                known += _parse_log(repo.git.show("-s", _FORMAT, sha, "--"))
            except Exception:
                continue  # not in this clone: placed by the file's date
        head = log[0].sha if log else None
        return GitFacts(root, head, tuple(reversed(log)), tuple(known))


def _file_date(f: baselines.BaselineFile) -> tuple[str, str]:
    if f.date:
        return utc_text(f.date), "file"
    mtime = _dt.datetime.fromtimestamp(f.path.stat().st_mtime, tz=_dt.timezone.utc)
    return mtime.strftime("%Y-%m-%d %H:%M:%S"), "file time"


def _commit_ref(f: baselines.BaselineFile, facts: GitFacts, index: dict[str, int]) -> CommitRef:
    sha = f.sha
    on_line = [c for c in facts.first_parent if c.sha.startswith(sha)]
    known = on_line or [c for c in facts.known if c.sha.startswith(sha)]
    branch = str(f.commit.get("branch") or "")
    dirty = bool(f.commit.get("dirty"))
    if known:
        c = known[0]
        return CommitRef(c.sha, c.date, c.subject, branch, dirty, index.get(c.sha), "git")
    date, source = _file_date(f)
    return CommitRef(sha, date, "", branch, dirty, None, source)


def _spread(case: dict[str, Any], rate: float | None) -> tuple[float | None, float | None, str]:
    runs = [float(r) for r in case.get("runs") or [] if isinstance(r, (int, float)) and r]
    if rate is None:
        return None, None, ""
    if len(runs) >= 2:
        return min(runs), max(runs), f"range of {len(runs)} runs"
    iqr = case.get("iqr")
    if not isinstance(iqr, (int, float)):
        iqr = float(case.get("rel_iqr") or 0.0) * rate
    return rate - iqr / 2, rate + iqr / 2, "IQR of the blocks (one run)"


def _point(stored: StoredCase, ref: CommitRef) -> Point:
    case = stored.record
    rate, runs = stored.images_per_sec, stored.runs
    low, high, kind = _spread(case, rate)
    # The same noise the verdict uses: block spread, and half the range of repeated runs.
    noise = stored_noise(stored.rel_iqr, stored)
    return Point(ref, rate, low, high, kind, runs, noise)


def mark_changes(points: Sequence[Point], tolerance: float) -> list[Point]:
    """Each point compared with the previous point that has a figure: the change is marked
    when it exceeds the larger of ``tolerance`` and twice the noise of the two points."""
    marked: list[Point] = []
    previous: Point | None = None
    for p in points:
        if p.images_per_sec is None:
            marked.append(_replace(p, mark=Mark.OOM))
            continue
        if previous is None or previous.images_per_sec is None:
            marked.append(_replace(p, mark=Mark.NEW))
            previous = p
            continue
        change = p.images_per_sec / previous.images_per_sec - 1.0
        threshold = max(tolerance, NOISE_FACTOR * max(p.noise, previous.noise))
        if threshold > MAX_THRESHOLD:
            mark = Mark.UNSTABLE
        elif change < -threshold:
            mark = Mark.REGRESSED
        elif change > threshold:
            mark = Mark.IMPROVED
        else:
            mark = Mark.PASS
        marked.append(_replace(p, change=change, threshold=threshold, mark=mark))
        previous = p
    return marked


def _replace(p: Point, **changes: Any) -> Point:
    return dataclasses.replace(p, **changes)


def _key_parts(key: str, case: dict[str, Any]) -> tuple[str, str, str, int, str]:
    # Case keys are "model/mode/dtype/bsN/device"; stored fields win when present.
    parts = key.split("/")
    parts += [""] * (5 - len(parts))
    batch = case.get("batch_size")
    if not isinstance(batch, int):
        digits = parts[3][2:] if parts[3].startswith("bs") else ""
        batch = int(digits) if digits.isdigit() else 0
    return (
        str(case.get("model") or parts[0]),
        str(case.get("mode") or parts[1]),
        str(case.get("dtype") or parts[2]),
        batch,
        str(case.get("device_kind") or parts[4]),
    )


def _hardware_history(
    root: Path,
    hardware: str,
    files: list[baselines.BaselineFile],
    facts: GitFacts,
    tolerance: float,
    floors: Sequence[Floor],
) -> HardwareHistory:
    index = {c.sha: i for i, c in enumerate(facts.first_parent)}
    refs = {f.path: _commit_ref(f, facts, index) for f in files}

    def order(f: baselines.BaselineFile) -> tuple[int, int, str]:
        ref = refs[f.path]
        if ref.position is not None:
            return (0, ref.position, ref.date)
        return (1, 0, ref.date)

    files = sorted(files, key=order)
    keys = sorted({k for f in files for k in f.cases})
    cases = []
    for key in keys:
        holding = [f for f in files if key in f.cases]
        points = [_point(f.cases[key], refs[f.path]) for f in holding]
        on_line = [p for p in points if p.commit.in_history] or points
        off_line = [p for p in points if p not in on_line]
        model, mode, dtype, batch, device = _key_parts(key, holding[-1].cases[key].record)
        cases.append(
            CaseHistory(
                hardware,
                key,
                model,
                mode,
                dtype,
                batch,
                device,
                tuple(mark_changes(on_line, tolerance) + mark_changes(off_line, tolerance)),
                floor_for(floors, hardware, model, mode, dtype, batch),
            )
        )
    commits = tuple(refs[f.path] for f in files)
    notes = []
    off = [c for c in commits if not c.in_history]
    if facts.first_parent and off and len(off) < len(commits):
        notes.append(
            f"{len(off)} of {len(commits)} stored commits are not in the first-parent history "
            "of HEAD: drawn hollow, placed by their date, and not compared."
        )
    elif facts.first_parent and off:
        notes.append(
            f"None of the {len(commits)} stored commits is in the first-parent history of HEAD: "
            "ordered and compared by the date in their files."
        )
    return HardwareHistory(hardware, tuple(cases), commits, tuple(notes))


def load_history(
    root: Path,
    *,
    tolerance: float = DEFAULTS["unconfirmed_tolerance"],
    floors: Sequence[Floor] = (),
    git: GitFacts | None = None,
) -> History:
    """Read every baseline under ``root`` and place it in the git history of the repository
    holding ``root`` (``git`` overrides what is asked of git, for tests)."""
    errors: list[str] = []
    loaded: dict[str, list[baselines.BaselineFile]] = {}
    for key in baselines.hardware_keys(root):
        for path in baselines.commit_files(root, key).values():
            try:
                loaded.setdefault(key, []).append(baselines.load(path))
            except baselines.BaselineError as exc:
                errors.append(str(exc))
    shas = {f.sha for files in loaded.values() for f in files}
    facts = git if git is not None else git_facts(root, shas)
    notes = []
    if facts.repo_root is None:
        notes.append(
            f"No git repository holds {root}: commits are ordered by the date stored in each "
            "baseline file."
        )
    elif facts.head is None:
        notes.append(f"The repository {facts.repo_root} has no commits: ordered by file dates.")
    hardware = tuple(
        _hardware_history(root, hw, files, facts, tolerance, floors)
        for hw, files in sorted(loaded.items())
    )
    return History(str(root), facts, tolerance, hardware, tuple(notes), tuple(errors))


def summary_rows(history: History) -> list[Row]:
    """The latest point of every case as a summary :class:`Row` (change vs the previous commit
    on the line)."""
    rows = []
    for hw in history.hardware:
        for case in hw.cases:
            latest = case.latest
            before = None
            if latest.change is not None and latest.images_per_sec is not None:
                before = latest.images_per_sec / (1.0 + latest.change)
            rows.append(
                Row(
                    case=case.key,
                    model=case.model,
                    mode=case.mode,
                    dtype=case.dtype,
                    batch_size=case.batch_size,
                    device=case.device,
                    images_per_sec=latest.images_per_sec,
                    spread=latest.spread,
                    baseline_images_per_sec=before,
                    change=latest.change,
                    verdict=case.verdict.value,
                    hardware=hw.hardware,
                )
            )
    return rows
