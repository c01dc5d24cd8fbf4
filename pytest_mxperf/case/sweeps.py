"""``mxperf.sweep``: the points of a sweep measured through the fixture's case path (the
search itself is in `pytest_mxperf.measuring.sweep_search`)."""

from __future__ import annotations

import gc
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from pytest_mxperf.case.path import CaseBench
from pytest_mxperf.measuring import sweep_memory, sweep_search
from pytest_mxperf.measuring.records import CaseResult, Status


def sweep(
    bench: CaseBench,
    net: Any,
    *,
    batch_sizes: Sequence[int] | str,
    mode: str,
    dtypes: Sequence[str],
    start: int,
    max_batch: int,
    model: str | None,
    name: str | None,
    ctx: Any,
    **options: Any,
) -> sweep_search.Sweep:
    """`MxPerf.sweep` (its docstring and defaults) with the object first."""
    plan = sweep_search.make_plan(batch_sizes, start, max_batch)
    ctx = bench.default_ctx if ctx is None else ctx
    kind, _ = bench.backend.describe(ctx)
    label = bench.label(model)
    build = net if callable(net) and not _is_model(net) else _constant(net)
    out = sweep_search.Sweep(label, mode, kind)
    deadline = time.monotonic() + bench.settings.sweep_time
    # The dtypes the device cannot run are known before any point: each point's part names them.
    why_not = {dtype: bench.unsupported(dtype, kind, mode) for dtype in dtypes}
    skipped = {dtype: why for dtype, why in why_not.items() if why}
    for dtype in dtypes:
        if why_not[dtype]:
            out.curves[dtype] = sweep_search.Curve(dtype, skipped=why_not[dtype])
            continue
        first = len(bench.results)
        budget = _memory_budget(bench) if kind == "cpu" else None

        def point(batch: int, dtype: str = dtype) -> sweep_search.Point:
            return _point(
                bench, build, mode, batch, model=label, name=name, ctx=ctx, dtype=dtype, **options
            )

        out.curves[dtype] = curve = sweep_search.run_curve(
            dtype,
            plan,
            point,
            budget=budget,
            time_left=lambda: time.monotonic() < deadline,
            bisect_after_oom=kind != "cpu",
        )
        summary = _summary(bench, curve, bench.results[first:])
        # Its points kept with their sweep part, once the curve is closed: its summary and the
        # dtypes skipped.
        points = [replace(r, sweep={**summary, "skipped": skipped}) for r in bench.results[first:]]
        bench.results[first:] = points
        out.results += points
    return _finish_sweep(out)


def _finish_sweep(out: sweep_search.Sweep) -> sweep_search.Sweep:
    """The sweep, its dropped and unmeasured points warned about; the test skipped when every
    dtype was, failed when a curve measured nothing."""
    label, mode = out.model, out.mode
    if all(c.skipped for c in out.curves.values()):
        pytest.skip("; ".join(str(c.skipped) for c in out.curves.values()))
    for line in out.lines():
        if any(what in line for what in ("not measured", "dropped")):
            warnings.warn(f"mxperf: sweep {label}: {line}", pytest.PytestWarning, stacklevel=3)
    # A curve that fits no batch measured nothing: never a pass (strict or not).
    empty = [c for c in out.curves.values() if not c.skipped and c.largest_fit is None]
    if empty:
        pytest.fail(
            f"mxperf: sweep {label} ({mode}): nothing measured: "
            + "; ".join(c.describe() for c in empty),
            pytrace=False,
        )
    return out


def _memory_budget(bench: CaseBench) -> sweep_memory.MemoryBudget | None:
    start = sweep_memory.read_status().get("VmRSS")
    budget = bench.settings.memory_budget
    if budget is None:
        available = sweep_memory.available_memory()
        if available is None or start is None:
            return None
        budget = start + available // 2
    return sweep_memory.MemoryBudget(budget, start=start)


def _point(
    bench: CaseBench, build: Any, mode: str, batch: int, **kwargs: Any
) -> sweep_search.Point:
    meter = sweep_memory.PeakMeter()
    with meter.measuring():
        r = bench.case(build(), mode, batch, **kwargs)
    point = sweep_search.Point(batch, r.status.value, r.images_per_sec, r.rel_iqr, meter.peak)
    if r.status == Status.OOM:
        # Free what the failed allocation left (run_case dropped the model), then say how
        # much the process still holds: MXNet's pool and the allocator may keep it.
        gc.collect()
        bench.backend.sync()
        now = sweep_memory.read_status().get("VmRSS")
        kept = None if now is None or meter.before is None else now - meter.before
        point.note = r.error or "out of memory"
        if kept is not None and kept > sweep_memory.RETAINED_REPORT:
            point.note += (
                f"; after freeing it the process still holds {sweep_memory.mib(kept)} more than "
                "before (MXNet's memory pool or the allocator keeps it)"
            )
    return point


def _summary(
    bench: CaseBench, curve: sweep_search.Curve, results: list[CaseResult]
) -> dict[str, Any]:
    """The summary of a closed ``curve`` whose points' results are ``results``, as each point's
    sweep part holds it (shown under the sweep's grid and in the JSON)."""
    drop = None
    for r in results:
        ref = bench.run.baseline_for(r.hardware, r.key)
        if ref is not None and drop is None:
            drop = sweep_search.largest_fit_drop(curve.largest_fit, ref.case.record.get("sweep"))
    curve.notes += [f"batch {p.batch_size}: {p.note}" for p in curve.points if p.note]
    summary = curve.summary()
    summary["notes"] = list(curve.notes)
    if drop:
        curve.notes.append(drop)
        summary["largest_fit_drop"] = drop
    return summary


def _constant(net: Any) -> Any:
    def same() -> Any:
        return net

    return same


def _is_model(net: Any) -> bool:
    """A Gluon Block, a Symbol or an exported model's path (used as it is for every point),
    as opposed to a function that builds one."""
    return (
        hasattr(net, "collect_params")
        or hasattr(net, "list_arguments")
        or isinstance(net, (str, os.PathLike))
    )
