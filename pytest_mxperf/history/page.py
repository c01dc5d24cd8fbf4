"""The index on the history page: per case, the fitted index at each commit with its interval,
each step's commit (subject, measured ratio and interval, runner on hover), the marked steps.

`index_data` is the page's data (tested as data); `index_section` draws it with plotly.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mxperf.history.entries import Entry
from pytest_mxperf.history.fit import Fit
from pytest_mxperf.reporting.htmlchart import load_plotly


@dataclass(frozen=True)
class IndexPoint:
    commit: str
    subject: str
    index: float
    low: float
    high: float
    step: float | None  # the commit's fitted effect over the previous commit
    step_low: float | None
    step_high: float | None
    marked: bool  # the step's interval excludes no change
    measured: tuple[str, ...]  # each pair ending here: "0.920 [0.91 .. 0.93] vs abc, runner"


@dataclass(frozen=True)
class IndexCase:
    key: str
    points: tuple[IndexPoint, ...]
    level: float
    step_level: float
    note: str
    min_step: float = 0.0

    @property
    def marked(self) -> tuple[IndexPoint, ...]:
        return tuple(p for p in self.points if p.marked)


def _measured(e: Entry) -> str:
    runner = ", ".join(
        x
        for x in (
            e.hardware,
            f"mxnet {e.software['mxnet']}" if e.software.get("mxnet") else "",
            "calibrated" if e.calibration else "",
        )
        if x
    )
    # An adopted pair (a pull request's job) measured another sha with this commit's tree.
    where = f" (measured as {e.measured[:10]}, the same tree)" if e.measured else ""
    return (
        f"{e.ratio:.3f} [{e.low:.3f} .. {e.high:.3f}, {e.level:.0%}, {e.rounds} rounds] "
        f"vs {e.base[:10]} on {runner}{where}"
    )


def index_data(
    entries: Sequence[Entry], fits: Mapping[str, Fit], subjects: Mapping[str, str] = {}
) -> list[IndexCase]:
    """The page's data for each case's fit (``subjects``: commit messages from git, used when
    the entries do not carry one)."""
    cases = []
    for key, fitted in fits.items():
        steps = {s.commit: s for s in fitted.steps}
        mine = [e for e in entries if e.case == key]
        points = []
        for p in fitted.points:
            step = steps.get(p.commit)
            ending = [e for e in mine if e.commit == p.commit]
            subject = next((e.subject for e in ending if e.subject), subjects.get(p.commit, ""))
            points.append(
                IndexPoint(
                    p.commit,
                    subject,
                    p.index,
                    p.low,
                    p.high,
                    None if step is None else step.ratio,
                    None if step is None else step.low,
                    None if step is None else step.high,
                    step is not None and step.changed,
                    tuple(_measured(e) for e in ending),
                )
            )
        cases.append(
            IndexCase(
                key, tuple(points), fitted.level, fitted.step_level, fitted.note, fitted.min_step
            )
        )
    return cases


def mark_rule(step_level: float, min_step: float) -> str:
    """The marking rule in words (`fit.Step.changed`)."""
    rule = (
        f"its {step_level:.0%} interval excludes no change, or its own pair was judged "
        "regressed or improved"
    )
    return f"it is at least {min_step:.1%} either way and {rule}" if min_step else rule


def _hover(p: IndexPoint) -> str:
    step = "first commit: 1.0"
    if p.step is not None and p.step_low is not None and p.step_high is not None:
        step = f"step {p.step - 1:+.1%} [{p.step_low - 1:+.1%} .. {p.step_high - 1:+.1%}]"
        step += " CHANGED" if p.marked else ""
    lines = [f"<b>{p.commit[:10]}</b> {html.escape(p.subject[:80])}", step]
    lines.append(f"index {p.index:.3f} [{p.low:.3f} .. {p.high:.3f}]")
    lines += [html.escape(m) for m in p.measured]
    return "<br>".join(lines)


def index_figure(case: IndexCase) -> Any:
    go, _ = load_plotly()
    xs = list(range(len(case.points)))
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[p.index for p in case.points],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [p.high - p.index for p in case.points],
                "arrayminus": [p.index - p.low for p in case.points],
            },
            mode="lines+markers",
            name=f"index ({case.level:.0%} interval)",
            hovertext=[_hover(p) for p in case.points],
            hoverinfo="text",
        )
    )
    marked = [i for i, p in enumerate(case.points) if p.marked]
    fig.add_trace(
        go.Scatter(
            x=marked,
            y=[case.points[i].index for i in marked],
            mode="markers+text",
            marker={"color": "#d62728", "size": 12, "symbol": "diamond-open"},
            text=[case.points[i].commit[:7] for i in marked],
            textposition="top center",
            name=f"marked step: {mark_rule(case.step_level, case.min_step)}",
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        height=320,
        margin={"l": 50, "r": 20, "t": 20, "b": 40},
        xaxis={
            "title": "commit (first-parent order)",
            "tickvals": xs,
            "ticktext": [p.commit[:7] for p in case.points],
        },
        yaxis={"title": "relative index (1.0 at the first commit)"},
    )
    return fig


def index_section(cases: Sequence[IndexCase], where: str) -> str:
    """The page's section of the index (one chart per case), or '' with no case."""
    if not cases:
        return ""
    level, rule = cases[0].level, mark_rule(cases[0].step_level, cases[0].min_step)
    parts = [
        "<h2>Index of paired ratios</h2>",
        f'<p class="meta">From the history in {html.escape(where)}: per case, every paired '
        "ratio fitted over the commit graph (1.0 at the first commit), with its "
        f"{level:.0%} interval. A step is marked when {rule}. Ratios compare across "
        "machines; absolute img/s only within one hardware key (the sections below).</p>",
    ]
    for n, case in enumerate(cases, 1):
        plot = index_figure(case).to_html(
            full_html=False, include_plotlyjs=False, div_id=f"index-{n}"
        )
        marked = ", ".join(
            f"{p.commit[:10]} ({(p.step or 1) - 1:+.1%}) {html.escape(p.subject[:60])}"
            for p in case.marked
        )
        note = f'<p class="notes">{html.escape(case.note)}</p>' if case.note else ""
        parts.append(
            f'<div class="index" data-case="{html.escape(case.key)}"><h3>'
            f"{html.escape(case.key)}</h3><p>marked: {marked or 'none'}</p>{note}{plot}</div>"
        )
    return "".join(parts)
