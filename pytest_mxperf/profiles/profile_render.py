"""Write a profile diff as the short lines of a failure message."""

from __future__ import annotations

from pytest_mxperf.profiles.profile_diff import OperatorChange, ProfileDiff


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
