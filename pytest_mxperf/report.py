"""Rendering: the results table, the benchmark_score-style grids and the JSON report (pure)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tabulate import tabulate

from pytest_mxperf import cost, fingerprint, summary
from pytest_mxperf.options import Settings
from pytest_mxperf.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.runinfo import RunInfo

REPORT_SCHEMA = 1
MODE_SHORT = {"inference": "infer", "training": "train", "forward_backward": "fwd+bwd"}


def _rate(value: float | None) -> str:
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


def _cell(result: CaseResult) -> str:
    if result.status == Status.OOM:
        return "OOM"
    if result.status in (Status.NAN, Status.ERROR):
        return str(result.status.value).upper()
    rate = result.images_per_sec
    return f"{_rate(rate)} ±{result.rel_iqr / 2:.1%}" if rate is not None else "-"


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
            "img/s": _cell(r),
            "baseline": _rate(None if v is None else v.baseline_images_per_sec),
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


def summary_row(result: CaseResult) -> summary.Row:
    """A case as the CI summaries (Markdown, github-action-benchmark) show it."""
    v = result.verdict
    m = result.measurement
    return summary.Row(
        case=str(result.key),
        model=result.model,
        mode=result.mode,
        dtype=result.dtype,
        batch_size=result.batch_size,
        device=result.device,
        images_per_sec=result.images_per_sec,
        spread=None if m is None else m.iqr,
        baseline_images_per_sec=None if v is None else v.baseline_images_per_sec,
        change=None if v is None else v.change,
        verdict="-" if v is None else v.status,
        hardware=result.hardware,
    )


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
            row.append("" if found is None else _cell(found).split(" ±")[0])
        rows.append(row)
    return tabulate(
        rows, ["batch", *models], tablefmt="simple", stralign="right", disable_numparse=True
    ).splitlines()


def verdict_counts(results: Iterable[CaseResult]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        status = "-" if r.verdict is None else r.verdict.status
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def to_json(
    results: Sequence[CaseResult],
    run: RunInfo,
    settings: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The machine-readable report: every case with its samples, verdict and run facts; with
    ``price_per_hour``/``epoch_images`` in ``settings``, each case's ``cost``; the matrix-multiply
    peaks measured for the run under ``peaks``."""
    price, epoch = settings.get("price_per_hour"), settings.get("epoch_images")
    cases = []
    for r in sorted(results, key=lambda r: str(r.key)):
        data = r.as_dict()
        if price is not None or epoch is not None:
            data["cost"] = case_cost(r, price, epoch)
        cases.append(data)
    return {
        "schema": REPORT_SCHEMA,
        "run": {
            "commit": run.commit.as_dict(),
            "cpu_hardware": run.machine or run.cpu_key,
            "gpus": run.gpus,
            "started": run.started,
            "baseline_root": run.baseline_root,
        },
        "settings": dict(settings),
        "cases": cases,
        "peaks": peaks(results),
        **(dict(extra) if extra else {}),
    }


def case_cost(
    result: CaseResult, price_per_hour: float | None, epoch_images: int | None
) -> dict[str, Any] | None:
    """The cost figures of a case for JSON (None for a case without a figure)."""
    rate = result.images_per_sec
    if rate is None or rate <= 0:
        return None
    data: dict[str, Any] = {"price_per_hour": price_per_hour, "epoch_images": epoch_images}
    data["dollars_per_million_images"] = (
        None if price_per_hour is None else cost.dollars_per_million_images(rate, price_per_hour)
    )
    data["epoch_seconds"] = None if epoch_images is None else cost.epoch_seconds(rate, epoch_images)
    data["epoch_dollars"] = (
        None
        if epoch_images is None or price_per_hour is None
        else cost.epoch_dollars(rate, price_per_hour, epoch_images)
    )
    return data


def peaks(results: Iterable[CaseResult]) -> list[dict[str, Any]]:
    """The matrix-multiply peak of every (hardware, device, dtype) the cases were measured on."""
    found = {
        (r.hardware, r.device, r.dtype): r.peak_gflops for r in results if r.peak_gflops is not None
    }
    return [
        {"hardware": hw, "device": device, "dtype": dtype, "peak_gflops": gflops}
        for (hw, device, dtype), gflops in sorted(found.items())
    ]


def header_lines(
    run: RunInfo, settings: Settings, threads: Mapping[str, Any], workers: int
) -> list[str]:
    """The ``mxperf:`` lines of pytest's report header: hardware, commit, baselines, threads."""
    commit = run.commit
    state = "dirty" if commit.dirty else "clean" if commit.dirty is False else "?"
    lines = [
        f"mxperf: hardware {run.machine or run.cpu_key} (cpu)"
        + "".join(
            f", gpu {i}: {g['name']}"
            + (f" (nvidia-smi index {g['index']})" if g["index"] != str(i) else "")
            for i, g in enumerate(run.gpus)
        ),
        f"mxperf: commit {commit.short} "
        f"({commit.branch or 'detached'}, {state}, from {commit.source})",
        f"mxperf: baselines {run.baseline_root} "
        f"({run.baselines.count()} case(s) resolved"
        + (f", compared with {settings.compare}" if settings.compare else "")
        + ")",
        *(
            [
                f"mxperf: paired mode: {settings.ab} vs the working tree, {settings.rounds}"
                f"-{settings.max_rounds} rounds, minimum effect {settings.min_effect:.0%}"
            ]
            if settings.ab
            else []
        ),
        f"mxperf: threads {threads['omp_threads']} OpenMP thread(s) ({threads['source']})",
    ]
    if workers and run.gpus:
        mapping = ", ".join(
            f"gw{i} -> GPU {fingerprint.gpu_for_worker(f'gw{i}', len(run.gpus))}"
            for i in range(workers)
        )
        lines.append(f"mxperf: xdist GPU mapping {mapping}")
    if workers:
        lines.append("mxperf: xdist: CPU benchmarks take turns (one cross-process lock)")
    lines += [f"mxperf: warning: {w}" for w in run.baselines.warnings]
    lines += [f"mxperf: error: {e}" for e in run.baselines.errors]
    return lines


def results_sections(
    results: Sequence[CaseResult],
    stored_keys: Sequence[str],
    width: int,
    *,
    price_per_hour: float | None = None,
    epoch_images: int | None = None,
    memory: bool = False,
) -> list[tuple[str | None, list[str]]]:
    """The summary's result sections as ``(separator title or None, lines)``: the table, the
    grids, the verdict counts and hardware keys that have no baselines here."""
    if not results:
        return []
    table = render_table(
        results, width, price_per_hour=price_per_hour, epoch_images=epoch_images, memory=memory
    )
    sections: list[tuple[str | None, list[str]]] = [
        ("mxperf: throughput (images/sec, median ± half IQR)", table)
    ]
    sections += [(f"mxperf grid: {title}", lines) for title, lines in render_grids(results, width)]
    from pytest_mxperf.report_sections import render_scaling, render_sweeps

    sections += [(f"mxperf sweep: {t}", lines) for t, lines in render_sweeps(results, width)]
    scaling = render_scaling(results, width)
    if scaling:
        sections.append(("mxperf: data-parallel scaling (weak: same batch per device)", scaling))
    counts = ", ".join(f"{n} {status}" for status, n in verdict_counts(results).items())
    tail = [f"mxperf verdicts: {counts}"]
    machine = sum(1 for r in results if r.verdict and r.verdict.outcome == Outcome.MACHINE)
    if machine:
        tail.append(
            f"mxperf: {machine} case(s) below their stored figures run as fast as the baseline "
            "commit on this machine: the baselines do not hold here; store a baseline for this "
            "machine with --mxperf-update (or name its hardware key with --mxperf-machine)"
        )
    if price_per_hour is not None or epoch_images is not None:
        parts = [] if price_per_hour is None else [f"${price_per_hour:g} per hour"]
        parts += [] if epoch_images is None else [f"epoch = {epoch_images:,} images"]
        tail.append(f"mxperf cost: {', '.join(parts)}")
    found = peaks(results)
    if found:
        tail.append(
            "mxperf peak (matrix multiply): "
            + ", ".join(f"{p['device']} {p['dtype']} {p['peak_gflops']:.1f} GFLOP/s" for p in found)
        )
    for hardware in sorted({r.hardware for r in results} - set(stored_keys)):
        if stored_keys:
            tail.append(
                f"mxperf: no baselines for hardware {hardware}; stored for: "
                f"{', '.join(stored_keys)} (see --mxperf-machine)"
            )
    sections.append((None, tail))
    return sections
