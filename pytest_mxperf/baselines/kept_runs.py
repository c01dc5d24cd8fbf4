"""The runs a stored case keeps: the last few run medians merged on each update (the stored
figure is their median, their spread the case's noise), and the nearest of them a new figure is
judged against."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_mxperf.measuring.stats import median

RUNS_KEPT = 5


def with_runs(case: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """Keep the last few run medians of a case re-measured at the same commit on the same
    software, environment and threads; the stored images/sec is their median (repeated
    updates sample the same quantity), and their spread is the case's between-run noise.

    Runs measured on a dirty tree are dropped by a clean update: the stored figure of a clean
    case then rests on clean runs only (a dirty case says ``dirty: true`` for all its runs)."""
    same_setup = all(previous.get(k) == case.get(k) for k in ("software", "environment", "threads"))
    if previous.get("dirty") and not case.get("dirty"):
        same_setup = False  # a clean update drops the runs measured on a dirty tree
    old_runs = list(previous.get("runs", [])) if same_setup else []
    # machine_ids[i] is the anonymous id of the machine that measured runs[i] (None: unknown).
    old_ids = list(previous.get("machine_ids", [])) if same_setup else []
    old_ids = [None] * (len(old_runs) - len(old_ids)) + old_ids[-len(old_runs) :][: len(old_runs)]
    pairs = [(r, i) for r, i in zip(old_runs, old_ids) if r is not None]
    latest = case.pop("images_per_sec", None)
    case["images_per_sec"] = latest
    if latest is not None:
        pairs.append((latest, case.get("machine_id")))
    pairs = pairs[-RUNS_KEPT:]
    case["runs"] = [r for r, _ in pairs]
    case["machine_ids"] = [i for _, i in pairs]
    if latest is not None and len(case["runs"]) > 1:
        case["last_images_per_sec"] = latest
        case["images_per_sec"] = median(case["runs"])
    peaks = list(previous.get("peak_memory_runs", [])) if same_setup else []
    if same_setup and not peaks and previous.get("peak_memory_mb") is not None:
        peaks = [previous["peak_memory_mb"]]  # a file from before the peaks were kept
    if case.get("peak_memory_mb") is not None:
        peaks.append(case["peak_memory_mb"])
    if peaks:
        case["peak_memory_runs"] = peaks[-RUNS_KEPT:]
    return case


def nearest(values: Sequence[float], now: float | None) -> float | None:
    """``now`` clamped into the range of ``values``: the value a figure is judged against when
    any of them would do (None without values; their median without ``now``)."""
    if not values:
        return None
    if now is None:
        return median(list(values))
    return min(max(now, min(values)), max(values))
