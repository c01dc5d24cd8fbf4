"""History entries: one record per case per paired job, read from a paired run's JSON report.

An entry says what one job measured on one machine: HEAD's throughput over the commit it was
paired with (``ratio``, HEAD/base, > 1 faster), the interval the pair's verdict rests on, its
level and the degrees of freedom of its t quantile, the rounds, and the runner's facts.
Entries hold the *ratio*, never absolute figures: a ratio measured within one job holds
whatever the machine.

Identity and merge rule: an entry is one measurement, named by ``(case, commit, base, run)``
where ``run`` names the job (its start time and hardware key). Adding the same report twice
adds nothing; a job run again (another ``run``) adds a second measurement of the same pair,
and the fit (`fit`) weighs both. Stored lines are never rewritten: a store is the union of the
lines ever added, sorted, so two jobs that add at once merge by taking the union.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pytest_mxperf.judging.tdist import t_quantile

#: Two-sided normal quantiles of the levels a pair reports (99% fails, 90%/95% equivalence).
_Z = {0.80: 1.2816, 0.90: 1.6449, 0.95: 1.9600, 0.98: 2.3263, 0.99: 2.5758, 0.999: 3.2905}
#: Version of a stored entry line.
SCHEMA = 1
#: Statuses of a case whose pair measured a ratio (errors, new cases and skips measured none).
MEASURED = ("pass", "regressed", "improved", "inconclusive")


class EntryError(Exception):
    """A report or stored line that cannot give entries; the message says which and why."""


def z_of(level: float) -> float:
    """The two-sided normal quantile of ``level`` (0.99 -> 2.576)."""
    nearest = min(_Z, key=lambda known: abs(known - level))
    if abs(nearest - level) > 1e-6:
        raise EntryError(f"no quantile for an interval level of {level!r}")
    return _Z[nearest]


@dataclass(frozen=True)
class Entry:
    """One case's paired ratio in one job (see the module docstring)."""

    case: str
    commit: str  # HEAD's full sha
    base: str  # the full sha HEAD was paired with
    ratio: float  # HEAD/base throughput
    low: float
    high: float
    level: float  # of [low, high]
    rounds: int
    status: str
    run: str  # names the job: its start time and hardware key
    hardware: str
    software: dict[str, str] = field(default_factory=dict)
    calibration: dict[str, Any] | None = None
    plugin_version: str | None = None
    date: str = ""  # HEAD's commit date
    subject: str = ""  # HEAD's commit subject, when known where it was added
    #: Degrees of freedom of the t quantile [low, high] was taken with (`verdict.interval_df`);
    #: None for an entry from a report written before it was recorded.
    df: int | None = None
    #: The sha the pair measured as HEAD when it is not ``commit``: an entry adopted from a pull
    #: request's own pair, which measured its test merge commit, ``commit``'s tree (`adoption`).
    measured: str = ""
    schema: int = 1  # of the stored line: a newer one is refused, never rewritten
    #: Fields this version does not know (a newer plugin wrote them): kept as they were.
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.case, self.commit, self.base, self.run)

    @property
    def pair(self) -> tuple[str, str]:
        return (self.base, self.commit)

    @property
    def log_ratio(self) -> float:
        return math.log(self.ratio)

    @property
    def log_se(self) -> float:
        """Standard error of ``log(ratio)`` read back from the interval: its half-width in logs
        over the quantile it was taken with, Student's t at the level and `df` (the pair's
        own per-round SD over the square root of its rounds: `pairplan.half_width`)."""
        half = (math.log(self.high) - math.log(self.low)) / 2
        if self.df is None:
            # An entry from a report written before verdict.interval_df: the level's normal
            # quantile, as before. It overstates the error (3.9 times for a 99% interval of
            # 3 rounds, whose t quantile of 2 df is 9.92 against 2.58): such a pair weighs
            # less in the fit than it should, and the fit's intervals err wide.
            return max(half / z_of(self.level), 1e-6)
        return max(half / t_quantile(0.5 + self.level / 2, self.df), 1e-6)

    def to_line(self) -> str:
        data = asdict(self)
        data.update(data.pop("extra"))
        if data["df"] is None:
            del data["df"]  # a line from an older report stays as it was stored
        if not data["measured"]:
            del data["measured"]  # an entry measured at its own commit, as before
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        if not isinstance(data, dict):
            raise EntryError("not a history entry (not a JSON object)")
        if data.get("schema", 1) != SCHEMA:
            raise EntryError(
                f"schema {data.get('schema')!r}, this pytest-mxperf reads {SCHEMA}: "
                "written by another version (upgrade pytest-mxperf)"
            )
        known = {f.name for f in fields(cls)} - {"extra"}
        extra = {k: v for k, v in data.items() if k not in known}
        try:
            entry = cls(**{k: v for k, v in data.items() if k in known}, extra=extra)
            checks = (entry.ratio, entry.low, entry.high)
            if not all(isinstance(v, (int, float)) and v > 0 for v in checks):
                raise EntryError(f"ratio and interval must be > 0: {checks}")
            z_of(entry.level)
            df_of(entry.df)
            if not isinstance(entry.measured, str):
                raise EntryError(f"measured must be a commit sha, got {entry.measured!r}")
        except TypeError as exc:
            raise EntryError(f"not a history entry ({exc})") from None
        return entry


def parse_lines(text: str, where: str) -> list[Entry]:
    """The entries of a JSON Lines text (``where`` names it in errors)."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            found.append(Entry.from_dict(json.loads(line)))
        except (ValueError, RecursionError, EntryError) as exc:  # ValueError: JSON's too
            raise EntryError(f"{where}, line {n}: {exc}") from None
    return found


def union(*groups: list[Entry]) -> list[Entry]:
    """Every entry once (by identity; the first stored wins), in a fixed order, so the union
    of the same entries is the same text whatever order they were added in."""
    kept: dict[tuple[str, str, str, str], Entry] = {}
    for group in groups:
        for entry in group:
            kept.setdefault(entry.identity, entry)
    return sorted(kept.values(), key=lambda e: (e.date, e.commit, e.case, e.base, e.run))


def to_text(entries: list[Entry]) -> str:
    return "".join(e.to_line() + "\n" for e in union(entries))


def df_of(value: Any) -> int | None:
    """Degrees of freedom as stored (None: not recorded); anything but an integer >= 1 is
    refused, by name."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EntryError(f"degrees of freedom must be an integer >= 1, got {value!r}")
    return value


def _interval_level(verdict: dict[str, Any]) -> float:
    """The level of the verdict's interval: its ``interval_level`` (recorded since 0.2.0); in an
    older report, read from its message: the ``NN% interval`` whose ends are the interval's (a
    pass rests on its equivalence interval, anything else on the 99% one), 0.99 when the
    message names none."""
    level = verdict.get("interval_level")
    if level is not None:
        z_of(float(level))  # a level no quantile is known for is refused, by name
        return float(level)
    low, high = verdict["interval"]
    first = str(verdict.get("message") or "").split("\n", 1)[0]
    for level, lo, hi in re.findall(r"(\d+(?:\.\d+)?)% interval (\S+) \.\. (\S+?)[,;)]", first):
        if lo == f"{low - 1:+.1%}" and hi == f"{high - 1:+.1%}":
            return float(level) / 100
    return 0.99


def _case_entry(case: dict[str, Any], run: dict[str, Any], commit: str, plugin: Any) -> Entry:
    verdict = case["verdict"]
    low, high = (float(v) for v in verdict["interval"])
    ratio = 1.0 + float(verdict["change"])
    hardware = str(case.get("hardware") or run.get("cpu_hardware") or "")
    return Entry(
        case=str(case["key"]),
        commit=commit,
        base=str(verdict["baseline_commit"]),
        ratio=ratio,
        low=low,
        high=high,
        level=_interval_level(verdict),
        df=df_of(verdict.get("interval_df")),  # None in reports written before it: see log_se
        rounds=int(verdict.get("rounds") or 0),
        status=str(verdict.get("status") or verdict.get("outcome") or ""),
        run=f"{run.get('started') or ''} {hardware}".strip(),
        hardware=hardware,
        software={str(k): str(v) for k, v in (case.get("software") or {}).items()},
        calibration=case.get("calibration"),
        plugin_version=None if plugin is None else str(plugin),
        date=str((run.get("commit") or {}).get("date") or ""),
    )


def from_report(report: dict[str, Any], where: str = "report") -> list[Entry]:
    """The entries of a paired run's JSON report (``--mxperf-ab ... --mxperf-json``): one per
    case whose pair measured a ratio. A report of another kind of run is an error."""
    if not isinstance(report, dict) or not isinstance(report.get("cases"), list):
        raise EntryError(f"{where} is not an mxperf JSON report (no cases)")
    if not report.get("paired") and not (report.get("settings") or {}).get("ab"):
        raise EntryError(f"{where} is not from a paired run (run with --mxperf-ab REV)")
    run = report.get("run") or {}
    commit = str((run.get("commit") or {}).get("sha") or "")
    if not commit:
        raise EntryError(f"{where} names no commit for HEAD (run.commit.sha)")
    plugin = run.get("pytest_mxperf_version")  # recorded since 0.2.0
    found = []
    for case in report["cases"]:
        verdict = case.get("verdict") or {}
        measured = verdict.get("status") in MEASURED and verdict.get("interval")
        if measured and verdict.get("baseline_commit") and verdict.get("change") is not None:
            try:
                found.append(_case_entry(case, run, commit, plugin))
            except (KeyError, TypeError, ValueError, EntryError) as exc:
                raise EntryError(f"{where}: case {case.get('key')!r}: {exc}") from None
    return found
