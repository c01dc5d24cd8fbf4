"""The results as text tables: the main table, benchmark_score-style grids, their cells, and
the column-dropping fitter the other tables use (pure functions of the results and a width)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from tabulate import tabulate

from pytest_mxperf.measuring.records import CaseResult, Status, Verdict
from pytest_mxperf.reporting import cost

MODE_SHORT = {"inference": "infer", "training": "train", "forward_backward": "fwd+bwd"}


def rate_text(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 10_000 else f"{value:.0f}"


def _change(v: Verdict | None) -> str:
    """The change column: ``-8.1%``; a paired run's estimate with its interval's half-width,
    ``-8.1% ±2.0%``; a stored-baseline change arbitrated by a pair, both:
    ``-28.6%, pair +0.0% ±2.9%`` (the stored change has no interval of its own)."""
    if v is None or v.change is None:
        return "-"
    if v.interval is None:
        return f"{v.change:+.1%}"
    low, high = v.interval
    half = f"±{(high - low) / 2:.1%}"
    if v.threshold is None:  # --mxperf-ab: the change is the pair's estimate
        return f"{v.change:+.1%} {half}"
    return f"{v.change:+.1%}, pair {math.sqrt(low * high) - 1:+.1%} {half}"


def rate_cell(result: CaseResult) -> str:
    if result.status == Status.OOM:
        return "OOM"
    if result.status in (Status.NAN, Status.ERROR):
        return str(result.status.value).upper()
    rate = result.images_per_sec
    return f"{rate_text(rate)} ±{result.rel_iqr / 2:.1%}" if rate is not None else "-"


def _dollars(value: float) -> str:
    # Cents hide the cost of small models: below a dollar, three significant digits.
    return f"${value:,.2f}" if value >= 1 else f"${value:.3g}"


def cost_cells(
    result: CaseResult, price_per_hour: float | None, epoch_images: int | None
) -> tuple[str, str]:
    """The ``$/M img`` and ``epoch`` cells of a case: dollars per million images, and the time
    (and dollars, with a price) of one epoch of ``epoch_images``; ``-`` where unknown."""
    rate = result.images_per_sec
    if rate is None or rate <= 0:
        return "-", "-"
    per_million = "-"
    if price_per_hour is not None:
        per_million = _dollars(cost.dollars_per_million_images(rate, price_per_hour))
    epoch = "-"
    if epoch_images is not None:
        epoch = cost.format_duration(cost.epoch_seconds(rate, epoch_images))
        if price_per_hour is not None:
            epoch += " " + _dollars(cost.epoch_dollars(rate, price_per_hour, epoch_images))
    return per_million, epoch


def _peak_cell(result: CaseResult) -> str:
    share = result.percent_of_peak
    return "-" if share is None else f"{share:.1f}%"


def render_table(
    results: Sequence[CaseResult],
    width: int = 120,
    *,
    price_per_hour: float | None = None,
    epoch_images: int | None = None,
    memory: bool = False,
) -> list[str]:
    """One row per case: model, device, batch size (bs), img/s (median ± half the relative IQR),
    baseline, change, verdict, mode (infer/train/fwd+bwd) and dtype; with a price, dollars per
    million images (``$/M img``); with an epoch size, an ``epoch`` column; when any case has
    FLOPs, ``% of peak``; with ``memory``, the peak memory of each case (``peak MiB``). Where
    the lines would be wider than ``width``, % of peak, epoch,
    dtype, device, mode and bs are dropped in that order; rows are never wrapped."""
    headers = ["case", "device", "bs", "img/s", "baseline", "change", "verdict"]
    if price_per_hour is not None:
        headers.append("$/M img")
    if epoch_images is not None:
        headers.append("epoch")
    if any(r.percent_of_peak is not None for r in results):
        headers.append("% of peak")
    if memory:
        headers.append("peak MiB")
    headers += ["mode", "dtype"]
    rows = []
    for r in sorted(results, key=lambda r: (r.device_kind, r.mode, r.dtype, r.model, r.batch_size)):
        v = r.verdict
        per_million, epoch = cost_cells(r, price_per_hour, epoch_images)
        cells = {
            "case": r.key.label,
            "device": r.device,
            "bs": str(r.batch_size),
            "img/s": rate_cell(r),
            "baseline": rate_text(None if v is None else v.baseline_images_per_sec),
            "change": _change(v),
            "verdict": "-" if v is None else v.status,
            "$/M img": per_million,
            "epoch": epoch,
            "% of peak": _peak_cell(r),
            "peak MiB": "-" if r.memory is None else f"{r.memory.peak_mb:.0f}",
            "mode": MODE_SHORT.get(r.mode, r.mode),
            "dtype": r.dtype,
        }
        rows.append([cells[h] for h in headers])
    return fit_table(rows, headers, ("% of peak", "epoch", "dtype", "device", "mode", "bs"), width)


def fit_table(
    rows: Sequence[Sequence[object]], headers: list[str], drop: Sequence[str], width: int
) -> list[str]:
    """A plain table no wider than ``width`` where it can be: the columns named in ``drop``
    are left out, in that order, until the lines fit; rows are never wrapped."""
    keep = list(range(len(headers)))
    for name in (None, *drop):
        if name is not None:
            if name not in headers:
                continue
            keep.remove(headers.index(name))
        lines = tabulate(
            [[row[i] for i in keep] for row in rows],
            [headers[i] for i in keep],
            tablefmt="simple",
            disable_numparse=True,
        ).splitlines()
        if max(len(line) for line in lines) <= width:
            break
    return lines


def render_grids(results: Iterable[CaseResult], width: int = 120) -> list[tuple[str, list[str]]]:
    """benchmark_score-style grids: per (mode, dtype, device), batch sizes x models in img/s.
    Only groups that cover more than one model or batch size get a grid; a grid wider than
    ``width`` is split into several, each with as many model columns as fit."""
    groups: dict[tuple[str, str, str, str], list[CaseResult]] = {}
    for r in results:
        if r.scaling is not None:
            continue  # data-parallel cases have their own table (render_scaling)
        groups.setdefault((r.mode, r.dtype, r.device_kind, r.hardware), []).append(r)
    out = []
    for (mode, dtype, kind, hardware), members in sorted(groups.items()):
        batches = sorted({r.batch_size for r in members})
        models = sorted({r.model for r in members})
        if len(batches) * len(models) < 2:
            continue
        table = {(r.model, r.batch_size): r for r in members}
        title = f"{mode}, {dtype}, {kind} ({hardware}), images/sec"
        chunks: list[list[str]] = [[]]
        for model in models:
            wider = _grid(table, batches, [*chunks[-1], model])
            if chunks[-1] and max(map(len, wider)) > width:
                chunks.append([])
            chunks[-1].append(model)
        out += [(title, _grid(table, batches, chunk)) for chunk in chunks]
    return out


def _grid(
    table: dict[tuple[str, int], CaseResult], batches: list[int], models: list[str]
) -> list[str]:
    rows = []
    for batch in batches:
        row: list[str] = [str(batch)]
        for model in models:
            found = table.get((model, batch))
            row.append("" if found is None else rate_cell(found).split(" ±")[0])
        rows.append(row)
    return tabulate(
        rows, ["batch", *models], tablefmt="simple", stralign="right", disable_numparse=True
    ).splitlines()
