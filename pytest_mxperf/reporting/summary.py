"""CI summaries of case results: a GitHub-flavoured Markdown table and github-action-benchmark
JSON. Pure functions over :class:`Row`; the plugin maps its results to rows."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

UNIT = "images/sec"


@dataclass(frozen=True)
class Row:
    """One case as a CI summary shows it.

    ``spread`` is in images/sec (the interquartile range of the timed blocks, or the range of
    repeated runs); ``change`` is relative (``-0.12`` = 12% slower than the baseline).
    ``images_per_sec`` is None when the case produced no figure (out of memory, error).
    """

    case: str
    model: str
    mode: str
    dtype: str
    batch_size: int
    device: str
    images_per_sec: float | None
    spread: float | None
    baseline_images_per_sec: float | None
    change: float | None
    verdict: str
    hardware: str = ""


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _cell(text: str) -> str:
    # A '|' inside a cell would split it; GitHub renders the escaped form as the character.
    return text.replace("|", "\\|").replace("\n", " ")


def verdict_counts(rows: Sequence[Row]) -> str:
    """One line such as ``4 cases: 2 pass, 1 improved, 1 regressed`` (verdicts by count)."""
    counts = Counter(r.verdict for r in rows)
    parts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items(), key=_by_count))
    noun = "case" if len(rows) == 1 else "cases"
    return f"{len(rows)} {noun}" + (f": {parts}" if parts else "")


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


def to_markdown(rows: Sequence[Row], title: str = "mxperf: throughput") -> str:
    """A GitHub-flavoured Markdown table of ``rows`` and a one-line count of verdicts."""
    header = ["case", "device", "bs", "img/s", "spread", "baseline", "change", "verdict"]
    align = ["---", "---", "--:", "--:", "--:", "--:", "--:", "---"]
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for r in rows:
        change = "—" if r.change is None else f"{r.change:+.1%}"
        verdict = f"**{r.verdict}**" if r.verdict == "regressed" else r.verdict
        cells = [
            f"`{_cell(r.case)}`",
            _cell(r.device),
            str(r.batch_size),
            _rate(r.images_per_sec),
            _rate(r.spread),
            _rate(r.baseline_images_per_sec),
            change,
            _cell(verdict),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", verdict_counts(rows), ""]
    return "\n".join(lines)


def to_benchmark_action(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Rows in github-action-benchmark's ``customBiggerIsBetter`` format.

    Cases without a figure (out of memory, errors) are left out: the format has no way to say
    "no value", and a zero would draw a false cliff in the benchmark chart.
    """
    entries: list[dict[str, Any]] = []
    for r in rows:
        if r.images_per_sec is None or not math.isfinite(r.images_per_sec):
            continue
        extra = [f"verdict: {r.verdict}", f"batch size: {r.batch_size}", f"device: {r.device}"]
        if r.hardware:
            extra.append(f"hardware: {r.hardware}")
        if r.baseline_images_per_sec is not None:
            extra.append(f"baseline: {r.baseline_images_per_sec:.1f} {UNIT}")
        if r.change is not None:
            extra.append(f"change: {r.change:+.1%}")
        entry: dict[str, Any] = {
            "name": r.case if not r.hardware else f"{r.case} [{r.hardware}]",
            "unit": UNIT,
            "value": float(r.images_per_sec),
            "extra": "\n".join(extra),
        }
        if r.spread is not None:
            entry["range"] = f"± {r.spread / 2:.1f}"
        entries.append(entry)
    return entries
