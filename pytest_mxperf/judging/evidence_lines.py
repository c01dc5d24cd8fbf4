"""The evidence sections of a regression's message, in the order users read them: paired
evidence (already in the message), top operators, memory, what changed, commits between the
baseline and HEAD."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.profiles.profile_diff import diff_profiles, operator_label
from pytest_mxperf.profiles.profile_record import OPERATOR_CATEGORIES, OperatorProfile
from pytest_mxperf.profiles.profile_render import render_diff
from pytest_mxperf.system import gitinfo

#: Lines of ``git log`` a message shows at most.
MAX_COMMITS = 10
#: The message line that says what changed since the baseline (moved below the operators).
CHANGED_PREFIX = "changed since the baseline:"


def operator_lines(
    head: dict[str, Any] | None,
    base: dict[str, Any] | None,
    why_no_head: str | None,
    why_no_base: str | None,
) -> list[str]:
    """The top operators: a diff of the two profiles, or HEAD's own profile, or why not."""
    try:
        now = None if head is None else OperatorProfile.from_dict(head)
        before = None if base is None else OperatorProfile.from_dict(base)
    except ValueError as exc:
        return [f"top operators: profile unavailable: {exc}"]
    if now is None:
        return [f"top operators: profile unavailable: {why_no_head or 'not profiled'}"]
    if before is None:
        lines = [
            "top operators now (profile of the baseline unavailable: "
            f"{why_no_base or 'not profiled'}):"
        ]
        return lines + ["  " + line for line in own_profile_lines(now)]
    diff = diff_profiles(before, now)
    return ["top operators (baseline -> now):"] + ["  " + x for x in render_diff(diff)]


def own_profile_lines(p: OperatorProfile, top: int = 5) -> list[str]:
    """The operators that took most of one profile's time, per step."""
    ops = [o for o in p.operators if o.category in OPERATOR_CATEGORIES]
    total = sum(o.total_ms for o in ops) or 1.0
    ops.sort(key=lambda o: (-o.total_ms, o.name))
    return [
        f"{operator_label(o.name)}: {o.count / p.steps:g} per step, "
        f"{o.total_ms / p.steps:.2f} ms/step ({o.total_ms / total:.0%})"
        for o in ops[:top]
    ]


def memory_line(result: CaseResult, base_mb: float | None) -> str | None:
    """``peak memory: 120.0 -> 180.0 MiB (+50%, cpu, vmhwm)``."""
    mem = result.memory
    if mem is None:
        return None
    how = f"{mem.device}, {mem.method.value}"
    if base_mb is None:
        return f"peak memory: {mem.peak_mb:.1f} MiB ({how})"
    pct = f"{mem.peak_mb / base_mb - 1:+.0%}, " if base_mb > 0 else ""
    return f"peak memory: {base_mb:.1f} -> {mem.peak_mb:.1f} MiB ({pct}{how})"


def commit_paths(repo_root: str, test_file: str) -> list[str]:
    """What ``git log`` looks at: the test's folder (its file and the data beside it), the
    conftest files above it, and the repository's Python packages (top-level folders with
    ``__init__.py``, and ``src``)."""
    root = Path(repo_root).resolve()
    folder = Path(test_file).resolve().parent
    paths: list[str] = []
    if folder == root or root in folder.parents:
        paths.append(str(folder.relative_to(root)))
        above = folder.parent
        while root in above.parents or above == root:
            if (above / "conftest.py").exists():
                paths.append(str((above / "conftest.py").relative_to(root)))
            if above == root:
                break
            above = above.parent
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        if child.is_dir() and ((child / "__init__.py").exists() or child.name == "src"):
            paths.append(child.name)
    return sorted(set(paths))


def commit_lines(
    repo_root: str | None, base: str | None, head: str | None, paths: list[str]
) -> list[str]:
    """``commits since the baseline (git log --oneline BASE..HEAD -- paths):`` and at most
    `MAX_COMMITS` lines; nothing when git cannot answer."""
    if not repo_root or not base or not head or not paths:
        return []
    found = gitinfo.log_oneline(repo_root, base, head, paths, MAX_COMMITS)
    if found is None:
        return []
    lines, total = found
    what = f"git log --oneline {base[:10]}..{head[:10]} -- {' '.join(paths)}"
    if not lines:
        return [f"commits since the baseline: none touch the test or the package ({what})"]
    more = [f"  ... and {total - len(lines)} more"] if total > len(lines) else []
    return [f"commits since the baseline ({what}):"] + ["  " + x for x in lines] + more


def with_evidence(
    lines: Sequence[str],
    operators: Sequence[str],
    memory: Sequence[str],
    changed: Sequence[str],
    commits: Sequence[str],
) -> tuple[str, ...]:
    """A message's lines with the evidence in the order users read it: whatever they hold
    (top line, attempts, paired evidence), then top operators, memory, what changed (the line
    already said, else ``changed``), commits."""
    said = [x for x in lines if x.startswith(CHANGED_PREFIX)]
    kept = [x for x in lines if not x.startswith(CHANGED_PREFIX)]
    return (*kept, *operators, *memory, *(said or changed), *commits)
