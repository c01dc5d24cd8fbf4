"""Compare two operator profiles per step and per image: what ran more often, or took longer."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from pytest_mxperf.profiles.profile_record import OPERATOR_CATEGORIES, OperatorProfile

# Engine bookkeeping in the operator category: how many arrays were freed follows the Python
# code, not the model, so its run count says nothing about what the model computes.
_BOOKKEEPING = frozenset({"DeleteVariable"})


#: The most characters MXNet 1.9.1 keeps of a profiler entry's name (``src/profiler/profiler.h``:
#: ``static_string<128>``, with its terminator): a fused entry listing many members is cut
#: there, mid-word (``...,BatchNorm,Convoluti``).
MXNET_NAME_LIMIT = 127


def _cut(name: str) -> bool:
    """Whether MXNet cut ``name`` inside its last member."""
    return len(name) >= MXNET_NAME_LIMIT and not name.endswith(",")


def constituents(name: str) -> tuple[str, ...]:
    """The operators behind one profiler entry.

    With oneDNN (MXNet's CPU default) a hybridized graph runs fused subgraphs whose profiler
    name lists their members, e.g. ``"Activation,Convolution,Activation,FullyConnected"``. A
    list MXNet cut at `MXNET_NAME_LIMIT` loses its last, cut member (never a made-up operator
    such as ``Convoluti``).
    """
    parts = [part.strip() for part in name.split(",") if part.strip()]
    if _cut(name) and len(parts) > 1:
        parts = parts[:-1]
    return tuple(parts) or (name,)


def operator_label(name: str) -> str:
    """A short display name: a fused entry becomes ``fused(Activation x2, Convolution)``; one
    whose name MXNet cut ends in ``…`` after its last whole member (or word of a single name)."""
    parts = constituents(name)
    more = ", …" if _cut(name) else ""
    if len(parts) == 1 and not (more and "," in name):
        if not more:
            return parts[0]
        return (name.rsplit("_", 1)[0] if "_" in name else name) + "…"
    counts = Counter(parts)
    members = ", ".join(op if n == 1 else f"{op} x{n}" for op, n in counts.items())
    return f"fused({members}{more})"


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
    changes = [_change(old, now, b_key, a_key, total_growth) for b_key, a_key in sides]
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


def _change(
    old: dict[tuple[str, str], _Side],
    now: dict[tuple[str, str], _Side],
    b_key: tuple[str, str] | None,
    a_key: tuple[str, str] | None,
    total_growth: float,
) -> OperatorChange:
    """One operator's change (``b_key`` before, ``a_key`` after: either may be missing, and
    they differ for a fused group whose members changed)."""
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
    return OperatorChange(
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
