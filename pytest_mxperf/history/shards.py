"""``mxperf merge``: the JSON reports of a suite's shards (a CI matrix, one job per shard) as
one report and one summary table. Every shard is accounted for: one that is missing, cannot be
read, crashed, reported errors or measured another commit is named, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_mxperf.reporting.jsonreport import ReportError, read_report


@dataclass
class Shard:
    name: str
    state: str  # "ok", "missing", "unreadable", "failed"
    why: str = ""
    cases: int = 0


@dataclass
class Merged:
    report: dict[str, Any]
    shards: list[Shard]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _read(path: Path) -> tuple[dict[str, Any] | None, Shard]:
    if not path.exists():
        return None, Shard(path.name, "missing", "no report (the shard did not run or finish)")
    try:
        data = read_report(path)
    except ReportError as exc:
        return None, Shard(path.name, "unreadable", str(exc))
    why = []
    if data.get("crashed"):
        why.append(f"crashed: {len(data['crashed'])} case(s)")
    if data.get("errors"):
        why.append(f"errors: {'; '.join(str(e) for e in data['errors'])[:200]}")
    if not data["cases"]:
        why.append("no case measured")
    state = "failed" if why else "ok"
    return data, Shard(path.name, state, "; ".join(why), len(data["cases"]))


def _identity(data: dict[str, Any]) -> tuple[str, str]:
    run = data.get("run") or {}
    sha = str((run.get("commit") or {}).get("sha") or "")
    paired = data.get("paired") or {}
    return sha, str(paired.get("rev_sha") or (data.get("settings") or {}).get("ab") or "")


def merge(paths: Sequence[Path], expect: int | None = None) -> Merged:
    """The shards' reports as one (cases concatenated, in shard order)."""
    shards, reports = [], []
    for path in paths:
        data, shard = _read(path)
        shards.append(shard)
        if data is not None:
            reports.append((shard, data))
    problems = [f"shard {s.name}: {s.state}: {s.why}" for s in shards if s.state != "ok"]
    if expect is not None and len(paths) < expect:
        problems.append(
            f"{expect} shards expected, {len(paths)} report(s) given: "
            f"{expect - len(paths)} shard(s) missing"
        )
    seen: dict[str, str] = {}
    cases: list[dict[str, Any]] = []
    for shard, data in reports:
        for case in data["cases"]:
            key = str(case.get("key"))
            if key in seen:
                problems.append(f"case {key} is in shards {seen[key]} and {shard.name}")
                continue
            seen[key] = shard.name
            cases.append({**case, "shard": shard.name})
    identities = {_identity(d) for _, d in reports}
    if len(identities) > 1:
        problems.append(
            "the shards measured different commits or pairs: "
            + ", ".join(f"{h[:10]} vs {r[:10] or '-'}" for h, r in sorted(identities))
        )
    first = reports[0][1] if reports else {}
    report = {
        **{k: first.get(k) for k in ("schema", "run", "settings", "paired")},
        "cases": cases,
        "errors": [e for _, d in reports for e in d.get("errors") or []],
        "crashed": [c for _, d in reports for c in d.get("crashed") or []],
        "baseline_errors": [e for _, d in reports for e in d.get("baseline_errors") or []],
        "baseline_warnings": [w for _, d in reports for w in d.get("baseline_warnings") or []],
        "shards": [vars(s) for s in shards],
        "merge_problems": problems,
    }
    return Merged(report, shards, problems)


def _row(case: dict[str, Any]) -> list[str]:
    verdict = case.get("verdict") or {}
    change = verdict.get("change")
    interval = verdict.get("interval") or []
    span = f"{interval[0] - 1:+.1%} .. {interval[1] - 1:+.1%}" if len(interval) == 2 else ""
    return [
        str(case.get("key")),
        str(case.get("shard")),
        str(verdict.get("status") or case.get("status") or "-"),
        "-" if change is None else f"{change:+.1%}",
        span,
    ]


def summary(merged: Merged, fmt: str = "simple") -> str:
    """The merged summary: one line per case, then every shard and every problem."""
    rows = [_row(c) for c in merged.report["cases"]]
    table = tabulate(
        rows,
        ["case", "shard", "verdict", "change", "interval"],
        tablefmt=fmt,
        disable_numparse=True,
    )
    shards = tabulate(
        [[s.name, s.state, s.cases, s.why] for s in merged.shards],
        ["shard", "state", "cases", "why"],
        tablefmt=fmt,
        disable_numparse=True,
    )
    lines = [table, "", shards]
    if merged.problems:
        lines += ["", f"{len(merged.problems)} problem(s):"]
        lines += [f"- {p}" for p in merged.problems]
    return "\n".join(lines) + "\n"
