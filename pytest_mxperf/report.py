"""Rendering: the results table, the benchmark_score-style grids and the JSON report (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tabulate import tabulate

from pytest_mxperf.verdict import CaseResult

REPORT_SCHEMA = 1
MODE_SHORT = {"inference": "infer", "training": "train", "forward_backward": "fwd+bwd"}


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 10_000 else f"{value:.0f}"


def _cell(result: CaseResult) -> str:
    if result.status == "oom":
        return "OOM"
    if result.status in ("nan", "error"):
        return result.status.upper()
    rate = result.images_per_sec
    return f"{_rate(rate)} ±{result.rel_iqr / 2:.1%}" if rate is not None else "-"


def render_table(results: Sequence[CaseResult], width: int = 120) -> list[str]:
    """One row per case: model, device, batch size (bs), img/s (median ± half the relative IQR),
    baseline, change, verdict, mode (infer/train/fwd+bwd) and dtype. Where the lines would be
    wider than ``width``, dtype, device, mode and bs are dropped in that order; rows are
    never wrapped."""
    headers = ["case", "device", "bs", "img/s", "baseline", "change", "verdict", "mode", "dtype"]
    rows = []
    for r in sorted(results, key=lambda r: (r.device_kind, r.mode, r.dtype, r.model, r.batch_size)):
        v = r.verdict or {}
        change = v.get("change")
        name = r.key.split("/")[5] if r.key.count("/") > 4 else ""
        rows.append(
            [
                r.model + (f" [{name}]" if name else ""),
                r.device,
                r.batch_size,
                _cell(r),
                _rate(v.get("baseline_images_per_sec")),
                "-" if change is None else f"{change:+.1%}",
                v.get("status", "-"),
                MODE_SHORT.get(r.mode, r.mode),
                r.dtype,
            ]
        )
    keep = list(range(len(headers)))
    for drop in (None, "dtype", "device", "mode", "bs"):
        if drop is not None:
            keep.remove(headers.index(drop))
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
        status = (r.verdict or {}).get("status", "-")
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def to_json(
    results: Sequence[CaseResult],
    run: Mapping[str, Any],
    settings: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The machine-readable report: every case with its samples, verdict and run facts."""
    return {
        "schema": REPORT_SCHEMA,
        "run": {
            "commit": run.get("commit"),
            "cpu_hardware": run.get("cpu_key"),
            "gpus": run.get("gpus"),
            "started": run.get("started"),
            "baseline_root": run.get("baseline_root"),
        },
        "settings": dict(settings),
        "cases": [r.as_dict() for r in sorted(results, key=lambda r: r.key)],
        **(dict(extra) if extra else {}),
    }


def baseline_record(result: CaseResult, commit: Mapping[str, Any]) -> dict[str, Any]:
    """What a baseline file keeps of a case: summary, samples, and the stack it ran on."""
    m = result.measurement or {}
    return {
        "model": result.model,
        "mode": result.mode,
        "dtype": result.dtype,
        "batch_size": result.batch_size,
        "device_kind": result.device_kind,
        "status": result.status,
        "images_per_sec": result.images_per_sec,
        "iqr": m.get("iqr"),
        "rel_iqr": m.get("rel_iqr", 0.0),
        "block_images_per_sec": m.get("block_images_per_sec", []),
        "warmup_steps": m.get("warmup_steps"),
        "threads": result.threads,
        "software": result.software,
        "environment": result.environment,
        "dirty": bool(commit.get("dirty")),
    }
