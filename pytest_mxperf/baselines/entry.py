"""What a baseline file keeps of one measured case: a typed record built from its `CaseResult`.

`--mxperf-update` builds a `BaselineRecord` per case (`BaselineRecord.of`) and writes it as the
file's case object in one conversion (`as_dict`); the file is read back typed as
`pytest_mxperf.baselines.store.StoredCase`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.records import CaseResult, Scaling, Status


@dataclass(frozen=True)
class BaselineRecord:
    """A case as a baseline keeps it: summary, samples, the stack it ran on, and (data-parallel
    cases) the efficiency at its world size and where the time went."""

    key: CaseKey
    status: Status
    measurement: Measurement | None
    peak_memory_mb: float | None
    threads: dict[str, Any]
    software: dict[str, Any]
    environment: dict[str, Any]
    #: Measured on a tree with uncommitted changes.
    dirty: bool
    #: The anonymous id of the machine that measured it (None: not recorded).
    machine_id: str | None = None
    #: A sweep point's curve summary (None: not a sweep point).
    sweep: dict[str, Any] | None = None
    scaling: Scaling | None = None
    #: The pytest-mxperf version that measured it (None: not recorded).
    plugin_version: str | None = None

    @classmethod
    def of(
        cls,
        result: CaseResult,
        *,
        dirty: bool,
        machine_id: str | None = None,
        plugin_version: str | None = None,
    ) -> BaselineRecord:
        return cls(
            key=result.key,
            status=result.status,
            measurement=result.measurement,
            peak_memory_mb=None if result.memory is None else result.memory.peak_mb,
            threads=result.threads,
            software=result.software,
            environment=result.environment,
            dirty=dirty,
            machine_id=machine_id,
            sweep=result.sweep or None,
            scaling=result.scaling,
            plugin_version=plugin_version,
        )

    def as_dict(self) -> dict[str, Any]:
        """The file's object for this case (the one conversion to the stored format)."""
        m, key = self.measurement, self.key
        data: dict[str, Any] = {
            "model": key.model,
            "mode": key.mode,
            "dtype": key.dtype,
            "batch_size": key.batch_size,
            "device_kind": key.device_kind,
            "status": self.status.value,
            "images_per_sec": None if m is None else m.items_per_sec,
            "iqr": None if m is None else m.iqr,
            "rel_iqr": 0.0 if m is None else m.rel_iqr,
            "block_images_per_sec": [] if m is None else m.block_rates,
            "warmup_steps": None if m is None else m.warmup_steps,
            "first_step_seconds": None if m is None else m.first_step_seconds,
            "warmup_seconds": None if m is None else m.warmup_seconds,
            "peak_memory_mb": self.peak_memory_mb,
            "threads": self.threads,
            "software": self.software,
            "environment": self.environment,
            "dirty": self.dirty,
            "machine_id": self.machine_id,
            "pytest_mxperf_version": self.plugin_version,
        }
        if self.sweep:
            data["sweep"] = self.sweep
        s = self.scaling
        if s is not None:
            # The aggregate img/s is ``images_per_sec``; the rest of the scaling beside it.
            data.update(
                kvstore=s.kvstore,
                world_size=s.world_size,
                scaling_kind=s.kind,
                efficiency=s.efficiency,
                comm_share=s.comm_share,
                single_images_per_sec=s.single_images_per_sec,
                single_rel_iqr=s.single_rel_iqr,
                per_worker_images_per_sec=list(s.per_worker_images_per_sec),
                threads_per_worker=s.threads_per_worker,
            )
        return data
