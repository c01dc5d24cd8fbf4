"""``--mxperf-update``: which results may become baselines, and storing them per hardware key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf.baselines import store as baselines
from pytest_mxperf.baselines.entry import BaselineRecord
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.measuring.stats import median
from pytest_mxperf.system import codec
from pytest_mxperf.system.gitinfo import CommitInfo


@dataclass
class StoreReport:
    """What an update wrote, what it left out and why, and what failed."""

    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: A file could not be written (not a bad stored file): the results must be kept elsewhere.
    write_failed: bool = False


def why_not_stored(result: CaseResult) -> str | None:
    """None when the result may be stored; else the reason it is left out (an error, NaN, or
    blocks too noisy to be anybody's baseline)."""
    if result.status not in (Status.OK, Status.OOM):
        return str(result.status.value)
    if result.measurement is not None and not result.measurement.steady:
        return f"block spread {result.rel_iqr:.0%}, too noisy"
    return None


def store_results(
    results: Sequence[CaseResult],
    commit: CommitInfo,
    root: Path,
    machine_id: str | None = None,
    plugin_version: str | None = None,
) -> StoreReport:
    """Store every storable result as the baseline of ``commit``, one file per hardware key;
    each case records the machine's anonymous id and the plugin version that measured it."""
    report = StoreReport()
    by_hw: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        why = why_not_stored(r)
        if why is not None:
            report.skipped.append(f"{r.key} ({why})")
            continue
        record = BaselineRecord.of(
            r, dirty=bool(commit.dirty), machine_id=machine_id, plugin_version=plugin_version
        )
        by_hw.setdefault(r.hardware, {})[str(r.key)] = record.as_dict()
    for hardware, cases in sorted(by_hw.items()):
        probes = [r.calibration for r in results if r.hardware == hardware and r.calibration]
        calibration = median(probes) if probes else None
        try:
            path = baselines.store(root, hardware, codec.to_dict(commit), cases, calibration)
        except baselines.BaselineError as exc:
            report.errors.append(f"baseline not written: {exc}")
            continue
        except OSError as exc:
            where = exc.filename or root / hardware
            report.errors.append(f"baseline not written: cannot write {where}: {exc.strerror}")
            report.write_failed = True
            continue
        report.written.append(f"{path} ({len(cases)} case(s))")
    return report
