"""The records of a baseline history: stored commits as the report places them, one case's
points at those commits with their change marks, and the histories per case, per hardware key
and for the whole baseline directory (frozen data; built by `pytest_mxperf.reporting.history`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pytest_mxperf.reporting.historygit import GitFacts


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
    #: The baseline directory as the page shows it: relative to the repository, or its name.
    shown_root: str = ""
