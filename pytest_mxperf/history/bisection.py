"""``mxperf bisect GOOD BAD``: the first commit whose paired ratio against GOOD is beyond the
minimum effect, by a binary search over the first-parent commits after GOOD up to BAD.

Each step is a paired run (``pytest --mxperf --mxperf-ab GOOD``) at the candidate commit,
checked out in a temporary worktree (the user's working tree is never touched), its JSON
report read back: a case regressed or improved -> the change is there ("moved"); every case
passed -> not yet ("same"); anything else (inconclusive, an error, no case) -> "undecided",
skipped as ``git bisect skip`` skips a commit. BAD is taken as moved, as ``git bisect`` takes it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mxperf.paired.gitcmd import WorktreeError, first_parent, git, resolve_rev
from pytest_mxperf.reporting.jsonreport import ReportError, read_report

MOVED, SAME, UNDECIDED = "moved", "same", "undecided"
#: Seconds one step's paired run may take before it counts as undecided.
STEP_TIMEOUT = 6 * 3600.0


@dataclass(frozen=True)
class StepResult:
    commit: str
    verdict: str  # MOVED, SAME or UNDECIDED
    detail: str  # the deciding cases' first message lines, or why undecided
    report: dict[str, Any] | None = None


@dataclass(frozen=True)
class Outcome:
    first: str | None  # the first commit that moved, None when skips leave it open
    suspects: tuple[str, ...]  # when None: the commits it may be (skipped ones and the next)
    steps: tuple[StepResult, ...]


def candidates(repo: Path, good: str, bad: str) -> list[str]:
    """The first-parent commits after ``good`` up to ``bad``, oldest first."""
    found = [c.sha for c in first_parent(repo, bad, since=good, check=True)]
    if not found:
        raise WorktreeError(f"no first-parent commit between {good[:10]} and {bad[:10]}")
    return found


def judge(report: dict[str, Any]) -> tuple[str, str]:
    """The verdict of one step from its paired run's JSON report, and the lines behind it."""
    cases = [c for c in report.get("cases") or [] if c.get("verdict")]
    statuses = {c["key"]: c["verdict"].get("status") for c in cases}
    lines = {c["key"]: str(c["verdict"].get("message") or "").split("\n")[0] for c in cases}
    moved = [k for k, s in statuses.items() if s in ("regressed", "improved")]
    if moved:
        return MOVED, "; ".join(lines[k] for k in moved)
    if statuses and all(s == "pass" for s in statuses.values()):
        return SAME, f"{len(statuses)} case(s) the same within the minimum effect"
    if not statuses:
        return UNDECIDED, "no case measured (collection or run error)"
    other = [f"{k}: {s}" for k, s in statuses.items() if s != "pass"]
    return UNDECIDED, "; ".join(other)


def paired_step(
    repo: Path, good: str, pytest_args: Sequence[str], timeout: float = STEP_TIMEOUT
) -> Callable[[str], StepResult]:
    """The oracle: a paired run of a candidate against ``good`` in a temporary worktree."""

    def run(commit: str) -> StepResult:
        with tempfile.TemporaryDirectory(prefix="mxperf-bisect-") as tmp:
            tree = Path(tmp) / "tree"
            git(repo, "worktree", "add", "-q", "--detach", str(tree), commit)
            out = Path(tmp) / "report.json"
            argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--mxperf"]
            argv += ["--mxperf-ab", good, "--mxperf-json", str(out), *pytest_args]
            why = "the paired run wrote no report"
            try:
                done = subprocess.run(
                    argv,
                    cwd=tree,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
                report = read_report(out) if out.exists() else None
                last = (done.stdout.strip() or done.stderr.strip()).splitlines()[-1:]
                why += f" ({last[0][:200]})" if last else ""
            except subprocess.TimeoutExpired:
                report, why = None, f"the paired run took more than {timeout:.0f} s"
            except ReportError as exc:
                report, why = None, str(exc)
            finally:
                git(repo, "worktree", "remove", "--force", str(tree), check=False)
        if report is None:
            return StepResult(commit, UNDECIDED, why)
        verdict, detail = judge(report)
        return StepResult(commit, verdict, detail, report)

    return run


def search(commits: Sequence[str], oracle: Callable[[str], StepResult]) -> Outcome:
    """Binary search for the first commit of ``commits`` (oldest first; the last one is BAD,
    taken as moved) that moved, skipping undecided steps."""
    lo, hi = -1, len(commits) - 1  # commits[lo] same (GOOD when -1), commits[hi] moved
    skipped: set[int] = set()
    steps: list[StepResult] = []
    while hi - lo > 1:
        open_ = [i for i in range(lo + 1, hi) if i not in skipped]
        if not open_:
            suspects = tuple(commits[i] for i in range(lo + 1, hi + 1))
            return Outcome(None, suspects, tuple(steps))
        middle = (lo + hi) / 2
        pick = min(open_, key=lambda i: (abs(i - middle), i))
        step = oracle(commits[pick])
        steps.append(step)
        if step.verdict == MOVED:
            hi = pick
        elif step.verdict == SAME:
            lo = pick
        else:
            skipped.add(pick)
    return Outcome(commits[hi], (commits[hi],), tuple(steps))


def resolve(repo: Path, rev: str) -> str:
    """The full sha of ``rev`` (`WorktreeError` naming an unknown one)."""
    return resolve_rev(repo, rev)
