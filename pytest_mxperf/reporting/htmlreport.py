"""One self-contained HTML page of the stored history: a summary table, then per hardware key
one plotly chart per case (drawn by `htmlchart`), with a small filter by model, mode, dtype and
hardware.

plotly's JavaScript is inlined once in the page, so it opens without a network; plotly comes
from `htmlchart.load_plotly`, only when a page is built (the ``report`` extra).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from pytest_mxperf.reporting import cost
from pytest_mxperf.reporting.history import summary_rows
from pytest_mxperf.reporting.historytypes import CaseHistory, History, Mark
from pytest_mxperf.reporting.htmlchart import STYLE, case_figure, load_plotly
from pytest_mxperf.system import files


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem;color:#222}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
h3{font-size:.95rem;margin:.8rem 0 0;font-family:ui-monospace,monospace}
table{border-collapse:collapse;font-size:.85rem}
th,td{padding:.25rem .6rem;border-bottom:1px solid #eee;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.regressed,.oom{color:#d62728;font-weight:600}.improved{color:#2ca02c}
.below-expectation{color:#ff7f0e;font-weight:600}.unstable{color:#8c8c8c}.inconclusive{color:#8c8c8c}
.meta,.notes{color:#555;font-size:.85rem}#filters{margin:1rem 0;display:flex;gap:1rem}
#filters label{font-size:.85rem}.key span{margin-right:1rem}
"""

_FILTER_JS = """
(function(){
  var fields=["hardware","model","mode","dtype"];
  function apply(){
    var want={};
    fields.forEach(function(f){want[f]=document.getElementById("filter-"+f).value;});
    document.querySelectorAll("[data-filterable]").forEach(function(el){
      var show=fields.every(function(f){return !want[f]||el.dataset[f]===want[f];});
      el.style.display=show?"":"none";
      if(show&&el.classList.contains("case")&&window.Plotly){
        el.querySelectorAll(".js-plotly-plot").forEach(function(p){Plotly.Plots.resize(p);});
      }
    });
    document.querySelectorAll("section.hardware").forEach(function(s){
      var any=s.querySelector(".case:not([style*='none'])");
      s.style.display=any?"":"none";
    });
  }
  fields.forEach(function(f){
    document.getElementById("filter-"+f).addEventListener("change",apply);
  });
  // A link such as report.html#hardware=cpu-x&mode=training opens with those filters set.
  var wanted=new URLSearchParams(location.hash.slice(1));
  fields.forEach(function(f){
    if(wanted.has(f)){document.getElementById("filter-"+f).value=wanted.get(f);}
  });
  if(location.hash.length>1){apply();}
})();
"""


def _select(field: str, values: Sequence[str]) -> str:
    options = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)
    return (
        f'<label>{field} <select id="filter-{field}">'
        f'<option value="">all</option>{options}</select></label>'
    )


def _data_attrs(hardware: str, case: CaseHistory) -> str:
    return (
        f'data-filterable data-hardware="{_e(hardware)}" data-model="{_e(case.model)}" '
        f'data-mode="{_e(case.mode)}" data-dtype="{_e(case.dtype)}"'
    )


def _cost_cells(
    rate: float | None, price_per_hour: float | None, epoch_images: int | None
) -> tuple[list[str], list[str]]:
    """Header and cells of the cost columns (none when neither a price nor an epoch is given)."""
    head, cells = [], []
    if price_per_hour is not None:
        head.append("$ per million images")
        cells.append(
            "" if not rate else f"${cost.dollars_per_million_images(rate, price_per_hour):,.2f}"
        )
    if epoch_images is not None:
        head.append(f"epoch ({epoch_images:,} images)")
        text = "" if not rate else cost.format_duration(cost.epoch_seconds(rate, epoch_images))
        if rate and price_per_hour is not None:
            text += f", ${cost.epoch_dollars(rate, price_per_hour, epoch_images):,.2f}"
        cells.append(text)
    return head, cells


def _summary_table(
    history: History, price_per_hour: float | None = None, epoch_images: int | None = None
) -> str:
    cases = {(c.hardware, c.key): c for hw in history.hardware for c in hw.cases}
    rows = []
    cost_head, _ = _cost_cells(None, price_per_hour, epoch_images)
    for r in summary_rows(history):
        case = cases[(r.hardware, r.case)]
        latest = case.latest
        rate = "OOM" if r.images_per_sec is None else f"{r.images_per_sec:,.1f}"
        spread = "" if r.spread is None else f"{r.spread:,.1f}"
        change = "—" if r.change is None else f"{r.change:+.1%}"
        floor = "" if case.floor is None else f"{case.floor:,.1f}"
        css = r.verdict.replace(" ", "-")
        rows.append(
            f"<tr {_data_attrs(r.hardware, case)}><td>{_e(r.hardware)}</td>"
            f"<td><code>{_e(r.case)}</code></td><td class=num>{rate}</td>"
            f"<td class=num>{spread}</td><td class=num>{change}</td>"
            f'<td class="{_e(css)}">{_e(r.verdict)}</td><td class="num floor">{floor}</td>'
            f"<td><code>{_e(latest.commit.short)}</code> {_e(latest.commit.date[:10])}</td>"
            + "".join(
                f"<td class=num>{_e(c)}</td>"
                for c in _cost_cells(r.images_per_sec, price_per_hour, epoch_images)[1]
            )
            + "</tr>"
        )
    head = (
        "<tr><th>hardware</th><th>case</th><th>latest img/s</th><th>spread</th>"
        "<th>change vs previous</th><th>verdict</th><th>floor</th><th>commit</th>"
        + "".join(f"<th>{_e(h)}</th>" for h in cost_head)
        + "</tr>"
    )
    return f'<table id="summary"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def render_html(
    history: History,
    title: str = "mxperf: images/sec over commits",
    *,
    price_per_hour: float | None = None,
    epoch_images: int | None = None,
    index_html: str = "",
) -> str:
    """The whole page as a string (plotly's JavaScript inlined); with a price per hour and/or
    an epoch size, the summary table shows what the latest figures cost; ``index_html``: the
    section of paired ratios (`pytest_mxperf.history.page`), after the summary."""
    _, offline = load_plotly()
    # A page meant to be published as a CI artifact: names, never this machine's paths.
    shown = history.shown_root or Path(history.root).name
    meta = _meta(history, shown, price_per_hour)
    notes = [*history.notes, *(f"Unreadable: {e}" for e in history.errors)]
    all_cases = [c for hw in history.hardware for c in hw.cases]
    filters = "".join(
        _select(field, sorted({str(getattr(c, field)) for c in all_cases}))
        for field in ("hardware", "model", "mode", "dtype")
    )
    key = "".join(
        f'<span style="color:{colour}">{symbol.replace("-", " ")}: {mark.value}</span>'
        for mark, (colour, symbol) in STYLE.items()
        if mark is not Mark.NEW
    )
    sections = _sections(history)
    if not sections:
        sections.append(f"<p>No baselines stored under <code>{_e(shown)}</code>.</p>")
    notes_html = "".join(f'<p class="notes">{_e(note)}</p>' for note in notes)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{offline.get_plotlyjs()}</script></head><body>'
        f'<h1>{_e(title)}</h1><p class="meta">{" · ".join(meta)}</p>{notes_html}'
        f'<div id="filters">{filters}</div>'
        f"<h2>Summary</h2>{_summary_table(history, price_per_hour, epoch_images)}{index_html}"
        f'<p class="key">Markers: {key}; hollow: not in the first-parent history; '
        "bars: range of the stored runs (IQR of the blocks for a single run).</p>"
        f"{''.join(sections)}<script>{_FILTER_JS}</script></body></html>\n"
    )


def _meta(history: History, shown: str, price_per_hour: float | None) -> list[str]:
    """The page's header facts: the baselines folder, the repository and HEAD, the rule."""
    git = history.git
    meta = [f"Baselines: <code>{_e(shown)}</code>"]
    if git.name:
        meta.append(f"repository <code>{_e(git.name)}</code>")
    if git.head:
        meta.append(f"HEAD <code>{_e(git.head[:10])}</code>")
    meta.append(
        f"a change is marked beyond the larger of {history.tolerance:.0%} and twice the noise "
        "of the two commits compared"
    )
    if price_per_hour is not None:
        meta.append(f"cost at ${price_per_hour:g} per hour")
    return meta


def _sections(history: History) -> list[str]:
    """A section per hardware key, a plot per case (numbered across the page)."""
    sections = []
    n = 0
    for hw in history.hardware:
        parts = [f'<section class="hardware" id="hw-{_e(hw.hardware)}">']
        parts.append(f"<h2>{_e(hw.hardware)}</h2>")
        parts += [f'<p class="notes">{_e(note)}</p>' for note in hw.notes]
        for case in hw.cases:
            n += 1
            fig = case_figure(case)
            plot = fig.to_html(
                full_html=False,
                include_plotlyjs=False,
                div_id=f"plot-{n}",
                config={"displaylogo": False, "responsive": True},
            )
            parts.append(
                f'<div class="case" {_data_attrs(hw.hardware, case)} data-case="{_e(case.key)}" '
                f'data-points="{len(case.points)}"><h3>{_e(case.key)}</h3>{plot}</div>'
            )
        parts.append("</section>")
        sections.append("".join(parts))
    return sections


def write_report(
    history: History,
    out: Path,
    *,
    price_per_hour: float | None = None,
    epoch_images: int | None = None,
    index_html: str = "",
) -> Path:
    """Write the page to ``out`` atomically (readers never see half a page)."""
    text = render_html(
        history, price_per_hour=price_per_hour, epoch_images=epoch_images, index_html=index_html
    )
    files.write_text_atomic(out, text)  # a failed write leaves no temporary (megabytes)
    return out
