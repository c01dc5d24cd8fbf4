"""The summary's tables of two kinds of case: one grid per sweep (batch sizes x dtypes, with each
dtype's largest fit, best batch and plateau) and the data-parallel scaling table. Pure functions
of the results and the width."""

from __future__ import annotations

from collections.abc import Iterable

from tabulate import tabulate

from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.reporting.tables import MODE_SHORT, fit_table, rate_cell, rate_text

#: A sweep note under its grid is cut to its first line and this many characters (JSON has it
#: whole).
NOTE_WIDTH = 300


def render_sweeps(results: Iterable[CaseResult], width: int = 120) -> list[tuple[str, list[str]]]:
    """One grid per sweep (model, mode, device): batch sizes x dtypes in img/s, like the
    published fp32/fp16 tables, then each dtype's largest fit, best batch and plateau."""
    groups: dict[tuple[str, str, str, str], list[CaseResult]] = {}
    for r in results:
        if r.sweep is not None:
            groups.setdefault((r.key.label, r.mode, r.device_kind, r.hardware), []).append(r)
    out = []
    for (label, mode, kind, hardware), members in sorted(groups.items()):
        summaries = {r.dtype: r.sweep for r in members if r.sweep is not None}
        skipped: dict[str, str] = {}
        for curve in summaries.values():
            skipped.update(curve.get("skipped") or {})
        dtypes = sorted(set(summaries) | set(skipped), key=_dtype_order)
        table = {(r.dtype, r.batch_size): r for r in members}
        rows = []
        for batch in sorted({r.batch_size for r in members}):
            found = [table.get((d, batch)) for d in dtypes]
            rows.append(
                [str(batch)] + ["" if f is None else rate_cell(f).split(" ±")[0] for f in found]
            )
        lines = tabulate(
            rows, ["batch", *dtypes], tablefmt="simple", stralign="right", disable_numparse=True
        ).splitlines()
        for dtype in dtypes:
            if dtype in skipped and dtype not in summaries:
                lines.append(f"{dtype}: skipped ({skipped[dtype]})")
                continue
            sm = summaries[dtype]
            line = (
                f"{dtype}: largest batch that fits {sm.get('largest_fit') or 'none'} "
                f"(limit: {sm.get('limit')}), best {sm.get('best') or '-'}, "
                f"plateau from {sm.get('plateau') or '-'}"
            )
            if sm.get("not_measured"):
                line += "; not measured (time budget): " + ", ".join(map(str, sm["not_measured"]))
            lines.append(line)
            for note in sm.get("notes") or []:
                first = str(note).splitlines()[0] if str(note).strip() else ""
                lines.append(f"{dtype}: {first[:NOTE_WIDTH]}")
            if sm.get("largest_fit_drop"):
                lines.append(f"{dtype}: {sm['largest_fit_drop']}")
        out.append(
            (f"{label}, {MODE_SHORT.get(mode, mode)}, {kind} ({hardware}), images/sec", lines)
        )
    return out


def _dtype_order(dtype: str) -> int:
    order = ("float32", "float16", "amp", "bfloat16")
    return order.index(dtype) if dtype in order else len(order)


def render_scaling(results: Iterable[CaseResult], width: int = 120) -> list[str]:
    """Data-parallel cases as the published scaling tables show them: per model, kvstore and
    per-device batch, devices (world size) and scaling kind (weak: the same batch per device;
    strong: a total batch split) -> aggregate img/s -> efficiency, with img/s(1),
    the per-worker figures, the kvstore share of a step (and of it, for worker processes, the
    share spent waiting for the slowest worker) and the stored efficiency."""
    rows = []
    scaled = [r for r in results if r.scaling is not None]
    for r in sorted(scaled, key=lambda r: (r.model, r.device_kind, r.batch_size, str(r.key))):
        s = r.scaling
        assert s is not None
        v = r.verdict
        base = None if v is None else v.baseline_efficiency
        rows.append(
            [
                r.key.label,
                s.batch_per_device or r.batch_size,
                s.world_size,
                s.kind,
                rate_text(r.images_per_sec),
                f"{s.efficiency:.1%}",
                "-" if base is None else f"{base:.1%}",
                rate_text(s.single_images_per_sec),
                " ".join(rate_text(x) for x in s.per_worker_images_per_sec),
                f"{s.comm_share:.0%}",
                f"{min(s.wait_share, s.comm_share):.0%}" if s.kvstore.startswith("dist") else "-",
                "-" if s.threads_per_worker is None else str(s.threads_per_worker),
            ]
        )
    if not rows:
        return []
    headers = [
        "case",
        "bs/dev",
        "devices",
        "scaling",
        "img/s",
        "efficiency",
        "baseline",
        "img/s(1)",
        "per worker",
        "kv share",
        "of it wait",
        "threads",
    ]
    drop = ("of it wait", "threads", "bs/dev", "baseline", "img/s(1)")
    return fit_table(rows, headers, drop, width)
