"""The machine-readable report: every case as JSON with its cost and the run's peaks, and a
case as the CI summaries show it (pure)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_mxperf.baselines.runinfo import RunInfo
from pytest_mxperf.measuring.records import CaseResult, by_key
from pytest_mxperf.reporting import cost, summary
from pytest_mxperf.system import codec

REPORT_SCHEMA = 1


class ReportError(Exception):
    """A JSON report that cannot be used; the message names the file and why."""


def read_report(path: Path) -> dict[str, Any]:
    """The JSON report (``--mxperf-json``) at ``path``, for the commands that read one
    (``comment``, ``history add``, ``merge``, ``bisect``): a file that cannot be read, is not
    UTF-8, is not JSON or is nested too deeply, is not an mxperf report or has another schema
    is a `ReportError` naming it, never a traceback."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: also not UTF-8
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ReportError(f"cannot read the report {path}: {why}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise ReportError(f"{path}: not an mxperf JSON report (no list of 'cases')")
    if data.get("schema") != REPORT_SCHEMA:
        raise ReportError(
            f"{path}: report schema {data.get('schema')!r} is not {REPORT_SCHEMA} (another "
            "pytest-mxperf version wrote it)"
        )
    return data


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


def to_json(
    results: Sequence[CaseResult],
    run: RunInfo,
    settings: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
    cwd: str | None = None,
) -> dict[str, Any]:
    """The machine-readable report: every case with its samples, verdict and run facts; with
    ``price_per_hour``/``epoch_images`` in ``settings``, each case's ``cost``; the matrix-multiply
    peaks measured for the run under ``peaks``. Paths are shown by `shown_path` from ``cwd``
    (default: the working directory): never absolute."""
    price, epoch = settings.get("price_per_hour"), settings.get("epoch_images")
    here, repo = os.getcwd() if cwd is None else cwd, run.commit.repo_root
    commit = {**codec.to_dict(run.commit), "repo_root": shown_path(repo, here, repo)}
    cases = []
    for r in sorted(results, key=by_key):
        data = codec.to_dict(r)
        if price is not None or epoch is not None:
            data["cost"] = case_cost(r, price, epoch)
        cases.append(data)
    return {
        "schema": REPORT_SCHEMA,
        "run": {
            "commit": commit,
            "cpu_hardware": run.machine or run.cpu_key,
            "gpus": run.gpus,
            "started": run.started,
            "baseline_root": shown_path(run.baseline_root, here, repo),
            "pytest_mxperf_version": run.plugin_version,
        },
        "settings": dict(settings),
        "cases": cases,
        "peaks": peaks(results),
        **(dict(extra) if extra else {}),
    }


def shown_path(path: str | None, cwd: str, repo_root: str | None) -> str | None:
    """``path`` as the report shows it, never absolute (no user or host name in it): relative
    to ``cwd`` when it is there or above it (``baselines``, ``..``), ``<repo>/...`` when it is
    elsewhere in the repository, ``<path>`` when it is outside both."""
    if not path:
        return path
    rel = os.path.relpath(os.path.abspath(path), cwd)
    parts = Path(rel).parts
    if ".." not in parts or set(parts) == {".."}:
        return rel
    if repo_root:
        inside = os.path.relpath(os.path.abspath(path), repo_root)
        if ".." not in Path(inside).parts:
            return "<repo>" if inside == "." else f"<repo>/{Path(inside).as_posix()}"
    return "<path>"


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
