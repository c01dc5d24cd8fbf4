"""The pull-request comment of a run, rendered from its JSON report (``--mxperf-json``): a hidden
marker by which the comment is found again, a one-line verdict, the verdict table and the first
lines of each failure's message. Pure: ``mxperf comment render`` reads the file and writes this."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mxperf.measuring.records import CaseResult, by_key
from pytest_mxperf.reporting import summary
from pytest_mxperf.reporting.jsonreport import REPORT_SCHEMA, summary_row
from pytest_mxperf.system import codec

#: The first line of every comment: ``mxperf comment post`` updates the comment that holds it.
MARKER = "<!-- pytest-mxperf comment -->"

#: Lines of a failure's message the comment shows (the lead: case, change, threshold, commit).
MESSAGE_LINES = 6


class CommentError(Exception):
    """The report cannot be read as an mxperf JSON report (named in one line)."""


@dataclass(frozen=True)
class Failure:
    """A case that failed: its key, its verdict's text and the first lines of its message."""

    case: str
    verdict: str
    change: float | None
    against: str | None
    lines: tuple[str, ...]


def cases_of(report: Mapping[str, Any]) -> list[CaseResult]:
    """The cases of a JSON report, or a `CommentError` naming what is wrong with it."""
    if not isinstance(report, Mapping) or "cases" not in report:
        raise CommentError("not an mxperf JSON report (no 'cases')")
    if report.get("schema") != REPORT_SCHEMA:
        raise CommentError(
            f"report schema {report.get('schema')!r} is not {REPORT_SCHEMA} (another "
            "pytest-mxperf version wrote it)"
        )
    results = []
    for i, data in enumerate(report["cases"]):
        try:
            results.append(codec.from_dict(CaseResult, data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CommentError(f"case {i + 1} of the report is not a case record ({exc})") from exc
    return results


def failures(results: Sequence[CaseResult], max_lines: int = MESSAGE_LINES) -> list[Failure]:
    """The failed cases (a failing verdict, or an error without one), in key order."""
    found = []
    for r in sorted(results, key=by_key):
        v = r.verdict
        if v is not None and v.failed:
            lines = tuple(x for x in v.lines if x.strip())[:max_lines]
            found.append(Failure(str(r.key), v.status, v.change, v.baseline_commit, lines))
        elif v is None and r.error:
            lines = tuple(x for x in r.error.splitlines() if x.strip())[:max_lines]
            found.append(Failure(str(r.key), r.status.value, None, None, lines))
    return found


def headline(report: Mapping[str, Any], results: Sequence[CaseResult]) -> str:
    """The one-line verdict: ``pass``, ``regressed``, ``failed``, ``error`` or ``no cases``,
    with the verdict counts and what the run compared with."""
    failed = failures(results)
    rows = [summary_row(r) for r in results]
    counts = summary.verdict_counts(rows)
    errors = list(report.get("errors") or []) + list(report.get("crashed") or [])
    if failed:
        word = "regressed" if {f.verdict for f in failed} == {"regressed"} else "failed"
        icon = ":x:"
    elif errors:
        word, icon = "error", ":warning:"
    elif not results:
        word, icon = "no cases", ":grey_question:"
    else:
        word, icon = "pass", ":white_check_mark:"
    return f"{icon} **mxperf: {word}** ({counts}){_against(report)}"


def _against(report: Mapping[str, Any]) -> str:
    paired = report.get("paired")
    head = _short(((report.get("run") or {}).get("commit") or {}).get("sha"))
    at = f" at `{head}`" if head else ""
    if isinstance(paired, Mapping) and paired.get("rev"):
        rev = f"`{paired['rev']}`"
        sha = _short(paired.get("rev_sha"))
        return f"{at}, paired with {rev}" + (f" (`{sha}`)" if sha else "")
    return f"{at}, against the stored baselines"


def _short(sha: Any) -> str:
    return str(sha)[:10] if sha else ""


def render(report: Mapping[str, Any], run_url: str | None = None) -> str:
    """The comment's Markdown: marker, verdict line, table, failures, run errors, a link to
    the run (``run_url``)."""
    results = cases_of(report)
    lines = [MARKER, "", headline(report, results), ""]
    if results:
        table = summary.to_markdown([summary_row(r) for r in sorted(results, key=by_key)])
        # The table's own heading and count line repeat the verdict line: dropped.
        lines += [x for x in table.splitlines() if x.startswith("|")] + [""]
    failed = failures(results)
    if failed:
        lines += ["**What failed:**", ""]
        for f in failed:
            change = "" if f.change is None else f", {f.change:+.1%}"
            against = f" against `{_short(f.against)}`" if f.against else ""
            lines.append(f"- `{f.case}`: {f.verdict}{change}{against}")
            lines += ["", "  ```text", *(f"  {x}" for x in f.lines), "  ```"]
        lines.append("")
    errors = [str(e) for e in list(report.get("errors") or []) + list(report.get("crashed") or [])]
    if errors:
        lines += ["**Run errors:**", "", *(f"- {_one_line(e)}" for e in errors), ""]
    if run_url:
        lines += [f"[The run: job summary, logs and the JSON report]({run_url})", ""]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first.replace("|", "\\|")
