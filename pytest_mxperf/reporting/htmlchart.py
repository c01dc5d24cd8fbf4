"""One case's plotly chart: images/sec over the stored commits, the spread of each commit's
runs, the change marks (colour and symbol per `Mark`) and the expectation floor. plotly is
imported only here and in `htmlreport`, and only when a page is built (the ``report`` extra)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

from pytest_mxperf.reporting.historytypes import CaseHistory, Mark, Point

# Colour and symbol per mark; colour-blind safe pairs (blue/orange) plus distinct shapes.
STYLE: dict[Mark, tuple[str, str]] = {
    Mark.NEW: ("#4c72b0", "circle"),
    Mark.PASS: ("#4c72b0", "circle"),
    Mark.IMPROVED: ("#2ca02c", "triangle-up"),
    Mark.REGRESSED: ("#d62728", "triangle-down"),
    Mark.UNSTABLE: ("#8c8c8c", "diamond"),
    Mark.OOM: ("#d62728", "x"),
    Mark.BELOW: ("#ff7f0e", "square"),
}


class ReportError(Exception):
    """The page cannot be built; the message says why and what to do."""


def load_plotly() -> Any:
    """``(plotly.graph_objects, plotly.offline)``; `ReportError` naming the extra without it."""
    try:
        import plotly.graph_objects as go
        import plotly.offline
    except ImportError:
        raise ReportError(
            "the HTML report needs plotly: pip install 'pytest-mxperf[report]'"
        ) from None
    return go, plotly.offline


def _hover(p: Point) -> list[str]:
    c = p.commit
    rate = "OOM" if p.images_per_sec is None else f"{p.images_per_sec:,.1f} img/s"
    spread = "" if p.spread is None else f"{p.low:,.1f} – {p.high:,.1f} ({p.spread_kind})"
    change = (
        "" if p.change is None else f"{p.change:+.1%} vs previous (threshold ±{p.threshold:.0%})"
    )
    where = (
        f"first-parent #{c.position}"
        if c.in_history
        else f"not in the first-parent history of HEAD; placed by {c.date_source} date"
    )
    subject = c.subject or "(subject unknown: commit not in this repository)"
    return [c.short, subject[:80], rate, spread, change, f"{p.mark.value}; {where}"]


_HOVER = (
    "<b>%{customdata[0]}</b> %{customdata[1]}<br>%{customdata[2]}<br>spread %{customdata[3]}"
    "<br>%{customdata[4]}<br>%{customdata[5]}<extra></extra>"
)


def _trace(go: Any, points: Sequence[Point], name: str, hollow: bool) -> Any:
    ys = [0.0 if p.images_per_sec is None else p.images_per_sec for p in points]
    up = [0.0 if p.high is None else p.high - y for p, y in zip(points, ys)]
    down = [0.0 if p.low is None else y - p.low for p, y in zip(points, ys)]
    symbols = [
        STYLE[p.mark][1] + ("-open" if hollow and p.mark is not Mark.OOM else "") for p in points
    ]
    return go.Scatter(
        x=[p.commit.date for p in points],
        y=ys,
        name=name,
        mode="lines+markers" if not hollow else "markers",
        line={"color": "#4c72b0", "width": 1.5},
        marker={
            "size": 11,
            "color": [STYLE[p.mark][0] for p in points],
            "symbol": symbols,
            "line": {"width": 1.5, "color": [STYLE[p.mark][0] for p in points]},
        },
        error_y={
            "type": "data",
            "symmetric": False,
            "array": up,
            "arrayminus": down,
            "color": "#7f7f7f",
            "thickness": 1.2,
            "width": 5,
        },
        customdata=[_hover(p) for p in points],
        hovertemplate=_HOVER,
    )


def case_figure(case: CaseHistory) -> Any:
    """The plotly figure of one case."""
    go, _ = load_plotly()
    fig = go.Figure()
    if case.line:
        fig.add_trace(_trace(go, case.line, "first-parent history", hollow=False))
    if case.off_line:
        fig.add_trace(_trace(go, case.off_line, "not in history", hollow=True))
    for p in case.points:
        if p.mark in (Mark.REGRESSED, Mark.IMPROVED) and p.change is not None:
            fig.add_annotation(
                x=p.commit.date,
                y=p.images_per_sec,
                text=f"{p.change:+.0%}",
                showarrow=True,
                arrowhead=2,
                ay=-30 if p.mark is Mark.IMPROVED else 30,
                font={"color": STYLE[p.mark][0]},
            )
    if case.floor is not None:
        fig.add_hline(
            y=case.floor,
            line={"dash": "dash", "color": "#ff7f0e", "width": 1.5},
            annotation_text=f"expected ≥ {case.floor:,.1f}",
            annotation_position="top left",
        )
    dates = sorted({p.commit.date for p in case.points})
    xaxis: dict[str, Any] = {"type": "date", "title": {"text": "commit date (UTC)"}}
    if len(dates) == 1:
        # plotly would zoom one date to milliseconds; show the day around it instead.
        day = _dt.datetime.fromisoformat(dates[0])
        xaxis["range"] = [str(day - _dt.timedelta(days=1)), str(day + _dt.timedelta(days=1))]
    fig.update_layout(
        height=300,
        margin={"l": 60, "r": 20, "t": 10, "b": 40},
        template="plotly_white",
        legend={"orientation": "h", "y": -0.2},
        yaxis={"title": {"text": "images/sec"}, "rangemode": "tozero"},
        xaxis=xaxis,
        hovermode="closest",
    )
    return fig
