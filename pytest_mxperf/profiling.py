"""Say what got slower: an MXNet operator profile of a case and the diff of two profiles.

The runner calls :func:`profile_step` after it has measured a case, never inside a timed block:
the profiler with aggregate statistics costs speed. A profile holds, per operator, how often it
ran and how long it took over a known number of steps, so two profiles (baseline and now) can be
compared per step and per image even when they ran a different number of steps.

Facts of MXNet 1.9.1 this module is built on (tried on this machine):

- ``dumps()`` writes the pending trace events to the configured trace file before it returns the
  aggregate statistics, and ``reset=True`` clears those statistics (safe only while
  ``aggregate_stats`` is on).
- ``dump(finished=True)`` closes the trace file, and any later ``set_config`` in the process then
  fails inside dmlc's thread group. So this module never calls ``dump``: it reads the events
  MXNet appended to a scratch file and writes the Chrome trace itself.
- The trace file gets its ``{"traceEvents": [`` header only on the first dump of the process;
  later files hold bare ``,``-separated events.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from hashlib import sha1
from pathlib import Path
from typing import Any, Callable

Step = Callable[[], object]
Sync = Callable[[], object]

# Aggregate categories that are MXNet operators (the other one, MXNET_C_API, counts C API calls
# whose number follows the Python code, not the model).
OPERATOR_CATEGORIES: tuple[str, ...] = ("operator",)
# Engine bookkeeping in the operator category: how many arrays were freed follows the Python
# code, not the model, so its run count says nothing about what the model computes.
_BOOKKEEPING = frozenset({"DeleteVariable"})
_TIME_UNITS_MS = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}


class ProfileUnavailable(RuntimeError):
    """The profiler could not produce a profile; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class OperatorStat:
    """One operator over a whole profile: how often it ran and its total time."""

    name: str
    category: str
    count: int
    total_ms: float


@dataclass(frozen=True)
class OperatorProfile:
    """Per-operator time of ``steps`` steps of one case (JSON-safe through ``as_dict``)."""

    operators: tuple[OperatorStat, ...]
    steps: int
    items_per_step: int
    # Largest device storage in use while profiling, per device ("cpu/0"), from the
    # profiler's memory category; empty when MXNet reported none.
    storage_max_kb: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.steps < 1 or self.items_per_step < 1:
            raise ValueError("a profile needs steps >= 1 and items_per_step >= 1")

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data (for baseline files, reports and worker output)."""
        return {
            "steps": self.steps,
            "items_per_step": self.items_per_step,
            "operators": [
                {"name": o.name, "category": o.category, "count": o.count, "total_ms": o.total_ms}
                for o in self.operators
            ],
            "storage_max_kb": {device: kb for device, kb in self.storage_max_kb},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OperatorProfile:
        """Rebuild a profile from :meth:`as_dict` output; a bad field raises ``ValueError``."""
        try:
            operators = tuple(
                OperatorStat(
                    name=str(o["name"]),
                    category=str(o["category"]),
                    count=int(o["count"]),
                    total_ms=float(o["total_ms"]),
                )
                for o in data["operators"]
            )
            storage = data.get("storage_max_kb", {})
            return cls(
                operators=operators,
                steps=int(data["steps"]),
                items_per_step=int(data["items_per_step"]),
                storage_max_kb=tuple(sorted((str(k), float(v)) for k, v in storage.items())),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an operator profile: {exc!r}") from None


@dataclass(frozen=True)
class TraceFiles:
    """Where a case's Chrome trace and aggregate table were written."""

    trace: Path
    table: Path


# profiling ------------------------------------------------------------------------------------
def profile_step(
    step: Step,
    sync: Sync,
    steps: int,
    mx: Any,
    trace_path: str | Path | None = None,
    *,
    items_per_step: int = 1,
) -> OperatorProfile:
    """Run ``steps`` already warmed-up steps under MXNet's profiler and return their profile.

    With ``trace_path`` the Chrome trace (``traceEvents``, for chrome://tracing or Perfetto) is
    written there and MXNet's aggregate table beside it (see :func:`table_path_for`).

    The profiler is left stopped with its statistics cleared, also when the step raises. Every
    failure, the step's included, becomes :class:`ProfileUnavailable`: a profile explains a
    regression, so its absence must not hide one.
    """
    if steps < 1:
        raise ValueError("profile_step needs steps >= 1")
    try:
        profiler = mx.profiler
    except AttributeError:
        raise ProfileUnavailable("this MXNet has no profiler module") from None
    with tempfile.TemporaryDirectory(prefix="mxperf-profile-") as scratch:
        # MXNet writes its trace events here; trace_path is written by us from this file,
        # so MXNet's end-of-process dump can never touch the user's trace.
        events_file = Path(scratch) / "events.json"
        started = False
        try:
            _guard(lambda: sync(), "sync before profiling")
            _guard(lambda: profiler.set_state("stop"), "set_state('stop')")
            _guard(
                lambda: profiler.set_config(
                    profile_all=True, aggregate_stats=True, filename=str(events_file)
                ),
                "set_config",
            )
            # Drop whatever an earlier user of the profiler left queued or counted.
            _guard(lambda: profiler.dumps(reset=True), "dumps(reset=True)")
            offset = events_file.stat().st_size if events_file.exists() else 0
            started = True  # from here on, whatever happens, stop and clear on the way out
            _guard(lambda: profiler.set_state("run"), "set_state('run')")
            try:
                for _ in range(steps):
                    step()
                sync()
            except Exception as exc:
                # Let work the step already queued finish while we still clear up after it,
                # so none of it lands in the next profile.
                with contextlib.suppress(Exception):
                    sync()
                raise ProfileUnavailable(f"the step raised {_short(exc)}") from exc
            _guard(lambda: profiler.set_state("stop"), "set_state('stop')")
            table = ""
            if trace_path is not None:  # the table must be read before the json dump resets
                table = _guard(lambda: str(profiler.dumps(format="table")), "dumps(format='table')")
            text = _guard(
                lambda: str(profiler.dumps(format="json", reset=True)), "dumps(format='json')"
            )
            profile = parse_aggregate_json(text, steps=steps, items_per_step=items_per_step)
            if trace_path is not None:
                events = read_trace_events(events_file, offset)
                write_trace(Path(trace_path), events, table)
            return profile
        finally:
            if started:
                _leave_stopped(profiler)


def _guard(call: Callable[[], Any], what: str) -> Any:
    try:
        return call()
    except ProfileUnavailable:
        raise
    except Exception as exc:
        raise ProfileUnavailable(f"{what} failed: {_short(exc)}") from exc


def _leave_stopped(profiler: Any) -> None:
    # Best effort: an error here must not replace the one being raised (if any), and the
    # next profile clears leftovers itself before it starts.
    with contextlib.suppress(Exception):
        profiler.set_state("stop")
    with contextlib.suppress(Exception):
        profiler.dumps(reset=True)


def _short(exc: BaseException) -> str:
    # MXNetError messages are C++ tracebacks; their last line says what went wrong.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[-1] if lines else ""
    name = type(exc).__name__
    text = text[len(name) + 1 :].strip() if text.startswith(name + ":") else text
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{name}: {text}" if text else name


def parse_aggregate_json(text: str, *, steps: int, items_per_step: int) -> OperatorProfile:
    """Turn MXNet's ``dumps(format='json')`` text into an :class:`OperatorProfile`."""
    if not text.strip():
        raise ProfileUnavailable("the profiler returned no statistics (aggregate_stats off?)")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProfileUnavailable(f"the profiler's statistics are not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("Time", {}), dict):
        raise ProfileUnavailable("the profiler's statistics have no 'Time' section")
    units = data.get("Unit", {}) if isinstance(data.get("Unit"), dict) else {}
    unit = str(units.get("Time", "ms"))
    if unit not in _TIME_UNITS_MS:
        raise ProfileUnavailable(f"the profiler reports time in an unknown unit {unit!r}")
    scale = _TIME_UNITS_MS[unit]
    operators: list[OperatorStat] = []
    for category, ops in data.get("Time", {}).items():
        if not isinstance(ops, dict):
            continue
        for name, stat in ops.items():
            try:
                operators.append(
                    OperatorStat(
                        name=str(name),
                        category=str(category),
                        count=int(stat["Count"]),
                        total_ms=float(stat["Total"]) * scale,
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue  # an entry without Count/Total (MXNet adds none today) says nothing
    if not any(o.category in OPERATOR_CATEGORIES for o in operators):
        raise ProfileUnavailable("the profiler recorded no operators (did the step run any?)")
    storage: list[tuple[str, float]] = []
    for devices in (data.get("Memory") or {}).values():
        if isinstance(devices, dict):
            for device, stat in devices.items():
                if isinstance(stat, dict) and "Max" in stat:
                    storage.append((str(device).removeprefix("Memory: "), float(stat["Max"])))
    operators.sort(key=lambda o: (o.category, -o.total_ms, o.name))
    return OperatorProfile(tuple(operators), steps, items_per_step, tuple(sorted(storage)))


# traces ---------------------------------------------------------------------------------------
def read_trace_events(path: Path, offset: int = 0) -> list[dict[str, Any]]:
    """The trace events MXNet wrote to ``path`` after byte ``offset``, as a list."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", errors="replace").strip()
    except OSError as exc:
        raise ProfileUnavailable(f"cannot read MXNet's trace events ({exc})") from None
    # Only the process's first dump carries the header; no dump here ever writes the footer.
    header = re.match(r'\{\s*"traceEvents"\s*:\s*\[', text)
    if header:
        text = text[header.end() :]
    footer = re.search(r'\]\s*,\s*"displayTimeUnit"\s*:\s*"[a-z]+"\s*\}\s*$', text)
    if footer:
        text = text[: footer.start()]
    text = text.strip().lstrip(",").strip().rstrip(",")
    try:
        events = json.loads(f"[{text}]")
    except ValueError as exc:
        raise ProfileUnavailable(f"MXNet's trace events are not valid JSON ({exc})") from None
    if not all(isinstance(e, dict) for e in events):
        raise ProfileUnavailable("MXNet's trace events are not JSON objects")
    return _with_process_names(events)


def _with_process_names(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # MXNet names its processes (devices, categories) only in the first dump of a process;
    # name the others after their category so the viewer shows a label, not a big number.
    named = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    extra: list[dict[str, Any]] = []
    for event in events:
        pid = event.get("pid")
        if pid is not None and pid not in named:
            named.add(pid)
            label = str(event.get("cat") or f"process {pid}")
            extra.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
    return extra + events


def table_path_for(trace_path: Path) -> Path:
    """The aggregate table beside a trace: ``x.trace.json`` -> ``x.table.txt``."""
    name = trace_path.name
    for suffix in (".trace.json", ".json"):
        if name.endswith(suffix):
            return trace_path.with_name(name[: -len(suffix)] + ".table.txt")
    return trace_path.with_name(name + ".table.txt")


def write_trace(trace_path: Path, events: list[dict[str, Any]], table: str) -> TraceFiles:
    """Write a Chrome trace of ``events`` and the aggregate ``table`` beside it."""
    table_path = table_path_for(trace_path)
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    _write_text(trace_path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    _write_text(table_path, table if table.endswith("\n") else table + "\n")
    return TraceFiles(trace_path, table_path)


def _write_text(path: Path, text: str) -> None:
    # Write then rename: a reader (or a crash) never sees half a file.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def safe_case_name(case_key: str) -> str:
    """A file name for a case key: readable, and unique even when characters were replaced."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", case_key).strip("._") or "case"
    if safe != case_key or len(safe) > 120:
        # "a/b" and "a_b" must not share a file: the hash of the real key tells them apart.
        safe = f"{safe[:120]}-{sha1(case_key.encode('utf-8')).hexdigest()[:8]}"
    return safe


def write_case_trace(
    directory: str | Path,
    case_key: str,
    step: Step,
    sync: Sync,
    steps: int,
    mx: Any,
    *,
    items_per_step: int = 1,
) -> tuple[OperatorProfile, TraceFiles]:
    """Profile a case into ``<directory>/<safe case key>.trace.json`` and ``.table.txt``.

    For ``--mxperf-profile DIR``: call after the case was measured, with its warmed-up step.
    Raises :class:`ProfileUnavailable` like :func:`profile_step`.
    """
    trace = Path(directory) / f"{safe_case_name(case_key)}.trace.json"
    profile = profile_step(step, sync, steps, mx, trace, items_per_step=items_per_step)
    return profile, TraceFiles(trace, table_path_for(trace))


# diff -----------------------------------------------------------------------------------------
def constituents(name: str) -> tuple[str, ...]:
    """The operators behind one profiler entry.

    With oneDNN (MXNet's CPU default) a hybridized graph runs fused subgraphs whose profiler
    name lists their members, e.g. ``"Activation,Convolution,Activation,FullyConnected"``.
    """
    return tuple(part.strip() for part in name.split(",") if part.strip()) or (name,)


def operator_label(name: str) -> str:
    """A short display name: a fused entry becomes ``fused(Activation x2, Convolution)``."""
    parts = constituents(name)
    if len(parts) == 1:
        return parts[0]
    counts = Counter(parts)
    return "fused(" + ", ".join(op if n == 1 else f"{op} x{n}" for op, n in counts.items()) + ")"


@dataclass(frozen=True)
class OperatorChange:
    """One profiler entry before -> after, normalized per step and per image (item).

    Sides are ``None`` when the entry ran on one side only. A fused entry whose members changed
    (a layer added inside a fused block) is one change with ``before_name`` and the members
    ``added``/``removed`` per call, not an unrelated new and gone pair.
    """

    name: str
    category: str
    count_per_step_before: float | None
    count_per_step_after: float | None
    ms_per_step_before: float | None
    ms_per_step_after: float | None
    ms_per_item_before: float | None
    ms_per_item_after: float | None
    # This entry's part of the total change of operator time per image; None when the total
    # did not change.
    share_of_change: float | None
    before_name: str | None = None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        """``new`` (after only), ``gone`` (before only), ``regrouped`` or ``changed``."""
        if self.ms_per_item_before is None:
            return "new"
        if self.ms_per_item_after is None:
            return "gone"
        return "regrouped" if self.before_name not in (None, self.name) else "changed"

    @property
    def label(self) -> str:
        return operator_label(self.name)

    @property
    def ms_per_item_growth(self) -> float:
        """Growth of time per image (ms); a side where the entry did not run counts as 0."""
        return (self.ms_per_item_after or 0.0) - (self.ms_per_item_before or 0.0)

    @property
    def relative_change(self) -> float | None:
        """Relative change of time per image (0.5 = +50%); None unless on both sides."""
        if self.ms_per_item_before is None or self.ms_per_item_after is None:
            return None
        if self.ms_per_item_before <= 0:
            return None
        return self.ms_per_item_after / self.ms_per_item_before - 1.0


@dataclass(frozen=True)
class CountChange:
    """How often one operator ran per step before -> after, fused members included."""

    name: str
    per_step_before: float
    per_step_after: float


@dataclass(frozen=True)
class ProfileDiff:
    """Two profiles compared; ``changes`` ranked by growth of time per image, largest first."""

    changes: tuple[OperatorChange, ...]
    count_changes: tuple[CountChange, ...]
    total_ms_per_step_before: float
    total_ms_per_step_after: float
    total_ms_per_item_before: float
    total_ms_per_item_after: float
    # Both profiles ran the same number of images per step, so per-step figures compare.
    same_items_per_step: bool

    @property
    def total_growth_ms_per_item(self) -> float:
        return self.total_ms_per_item_after - self.total_ms_per_item_before

    @property
    def new(self) -> tuple[OperatorChange, ...]:
        """Entries that ran only after."""
        return tuple(c for c in self.changes if c.status == "new")

    @property
    def gone(self) -> tuple[OperatorChange, ...]:
        """Entries that ran only before."""
        return tuple(c for c in self.changes if c.status == "gone")


_Side = tuple[float, float, float]  # count per step, ms per step, ms per item


def diff_profiles(
    before: OperatorProfile,
    after: OperatorProfile,
    categories: tuple[str, ...] | None = OPERATOR_CATEGORIES,
) -> ProfileDiff:
    """Compare two profiles per operator (within ``categories``; ``None`` = all of them)."""

    def entries(p: OperatorProfile) -> dict[tuple[str, str], _Side]:
        out: dict[tuple[str, str], _Side] = {}
        for o in p.operators:
            if categories is None or o.category in categories:
                ms = o.total_ms / p.steps
                out[(o.category, o.name)] = (o.count / p.steps, ms, ms / p.items_per_step)
        return out

    old, now = entries(before), entries(after)
    total_before = sum(side[1] for side in old.values())
    total_after = sum(side[1] for side in now.values())
    total_growth = total_after / after.items_per_step - total_before / before.items_per_step
    pairs = [(key, key) for key in sorted(set(old) & set(now))]
    regrouped = _pair_regrouped(sorted(set(old) - set(now)), sorted(set(now) - set(old)))
    paired_old = {b for b, _ in regrouped}
    paired_new = {a for _, a in regrouped}
    sides: list[tuple[tuple[str, str] | None, tuple[str, str] | None]] = [*pairs, *regrouped]
    sides += [(key, None) for key in sorted(set(old) - set(now) - paired_old)]
    sides += [(None, key) for key in sorted(set(now) - set(old) - paired_new)]
    changes: list[OperatorChange] = []
    for b_key, a_key in sides:
        b = old[b_key] if b_key else None
        a = now[a_key] if a_key else None
        growth = (a[2] if a else 0.0) - (b[2] if b else 0.0)
        key = a_key or b_key
        assert key is not None  # every side pair has at least one key
        added: tuple[str, ...] = ()
        removed: tuple[str, ...] = ()
        if a_key and b_key and a_key != b_key:
            members_b, members_a = Counter(constituents(b_key[1])), Counter(constituents(a_key[1]))
            added = tuple((members_a - members_b).elements())
            removed = tuple((members_b - members_a).elements())
        changes.append(
            OperatorChange(
                name=key[1],
                category=key[0],
                count_per_step_before=b[0] if b else None,
                count_per_step_after=a[0] if a else None,
                ms_per_step_before=b[1] if b else None,
                ms_per_step_after=a[1] if a else None,
                ms_per_item_before=b[2] if b else None,
                ms_per_item_after=a[2] if a else None,
                share_of_change=growth / total_growth if total_growth != 0 else None,
                before_name=b_key[1] if b_key else None,
                added=added,
                removed=removed,
            )
        )
    changes.sort(key=lambda c: (-c.ms_per_item_growth, c.name))
    return ProfileDiff(
        changes=tuple(changes),
        count_changes=_count_changes(old, now),
        total_ms_per_step_before=total_before,
        total_ms_per_step_after=total_after,
        total_ms_per_item_before=total_before / before.items_per_step,
        total_ms_per_item_after=total_after / after.items_per_step,
        same_items_per_step=before.items_per_step == after.items_per_step,
    )


def _pair_regrouped(
    gone: list[tuple[str, str]], new: list[tuple[str, str]]
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    # A fused block that gained or lost a member gets a new name; pair it with the old name
    # that shares the most members, so the diff says "this block grew", not "new + gone".
    candidates = []
    for b in gone:
        for a in new:
            fused = len(constituents(b[1])) > 1 or len(constituents(a[1])) > 1
            if b[0] != a[0] or not fused:
                continue
            overlap = sum((Counter(constituents(b[1])) & Counter(constituents(a[1]))).values())
            if overlap:
                candidates.append((-overlap, b, a))
    pairs: list[tuple[tuple[str, str], tuple[str, str]]] = []
    used_b: set[tuple[str, str]] = set()
    used_a: set[tuple[str, str]] = set()
    for _, b, a in sorted(candidates):
        if b not in used_b and a not in used_a:
            pairs.append((b, a))
            used_b.add(b)
            used_a.add(a)
    return pairs


def _count_changes(
    old: dict[tuple[str, str], _Side], now: dict[tuple[str, str], _Side]
) -> tuple[CountChange, ...]:
    def per_operator(entries: dict[tuple[str, str], _Side]) -> dict[str, float]:
        counts: dict[str, float] = {}
        for (_, name), side in entries.items():
            for member in constituents(name):
                counts[member] = counts.get(member, 0.0) + side[0]
        return counts

    b, a = per_operator(old), per_operator(now)
    out = [
        CountChange(name, b.get(name, 0.0), a.get(name, 0.0))
        for name in set(b) | set(a)
        if name not in _BOOKKEEPING
        # Counts are exact, but a mean per step of an operator that runs every few steps can
        # differ in the last digit.
        if not math.isclose(b.get(name, 0.0), a.get(name, 0.0), rel_tol=1e-9, abs_tol=1e-9)
    ]
    out.sort(key=lambda c: (c.per_step_before - c.per_step_after, c.name))
    return tuple(out)


def render_diff(diff: ProfileDiff, top: int = 5, min_share: float = 0.02) -> list[str]:
    """Short lines for a failure message.

    The total operator time; the operators that ran a different number of times per step; the
    ``top`` entries whose time grew by at least ``min_share`` of the total time before (smaller
    growth is profiler noise); new entries; gone entries. Times are per step when both profiles
    ran the same batch, per image otherwise.
    """
    same = diff.same_items_per_step
    unit = "ms/step" if same else "ms/image"

    def ms(c: OperatorChange) -> tuple[float | None, float | None]:
        if same:
            return c.ms_per_step_before, c.ms_per_step_after
        return c.ms_per_item_before, c.ms_per_item_after

    if same:
        total_b, total_a = diff.total_ms_per_step_before, diff.total_ms_per_step_after
    else:
        total_b, total_a = diff.total_ms_per_item_before, diff.total_ms_per_item_after
    lines = [f"operator time: {_ms(total_b)} -> {_ms(total_a)} {unit}{_pct(total_b, total_a)}"]
    if diff.count_changes:
        counts = ", ".join(
            f"{c.name} {_count(c.per_step_before)} -> {_count(c.per_step_after)}"
            for c in diff.count_changes[:top]
        )
        more = len(diff.count_changes) - top
        lines.append(f"runs per step: {counts}" + (f" and {more} more" if more > 0 else ""))
    floor = min_share * diff.total_ms_per_item_before
    grown = [c for c in diff.changes if c.ms_per_item_growth > max(floor, 0.0)][: max(top, 0)]
    growing = diff.total_growth_ms_per_item > 0
    for c in grown:
        share = ""
        if c.share_of_change is not None and growing:
            share = f", {c.share_of_change:.0%} of the change"
        before, after = ms(c)
        if c.status == "new":
            lines.append(
                f"new: {c.label}: {_count(c.count_per_step_after)} per step, "
                f"{_ms(after)} {unit}{share}"
            )
            continue
        members = ""
        if c.added:
            members += ", gained " + ", ".join(c.added)
        if c.removed:
            members += ", lost " + ", ".join(c.removed)
        lines.append(
            f"{c.label}{members}: {_count(c.count_per_step_before)} -> "
            f"{_count(c.count_per_step_after)} per step, "
            f"{_ms(before)} -> {_ms(after)} {unit}{_pct(before, after)}{share}"
        )
    for status, entries in (("new", diff.new), ("gone", diff.gone)):
        rest = [c.label for c in entries if c not in grown]
        if rest:
            more = len(rest) - top
            lines.append(
                f"{status}: {', '.join(rest[:top])}" + (f" and {more} more" if more > 0 else "")
            )
    return lines


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value >= 0.01 or value == 0 else f"{value:.2g}"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _pct(before: float | None, after: float | None) -> str:
    if before is None or after is None or before <= 0:
        return ""
    return f" ({after / before - 1:+.0%})"
