"""img/s(1) and img/s(N) of one data-parallel spec, measured in the same run, and what follows.

The efficiency, the exchange share, the aggregate as one `Measurement` and the `Scaling` record a
case result carries are all derived from the two `ScalingCase` records.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pytest_mxperf.measuring.dp_scaling import DataParallelSpec, ScalingCase, efficiency
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.records import Scaling


@dataclass(frozen=True)
class DataParallelResult:
    """img/s(1) and img/s(N) of one spec, measured in the same run, and what follows from them."""

    spec: DataParallelSpec
    single: ScalingCase
    scaled: ScalingCase

    @property
    def kvstore(self) -> str:
        return self.spec.kvstore

    @property
    def world_size(self) -> int:
        return self.scaled.world_size

    @property
    def images_per_sec(self) -> float:
        """Aggregate images/sec of all N workers over their common time window."""
        return self.scaled.images_per_sec

    @property
    def per_worker_images_per_sec(self) -> tuple[float, ...]:
        return self.scaled.per_worker_images_per_sec

    @property
    def efficiency(self) -> float:
        """img/s(N) / (N x img/s(1)): 1.0 is perfect scaling of the spec's kind (img/s(1) at
        the per-device batch for weak scaling, at the total batch for strong)."""
        return efficiency(self.single.images_per_sec, self.images_per_sec, self.world_size)

    @property
    def speedup(self) -> float:
        """img/s(N) / img/s(1): for strong scaling, how much sooner the same batch is done."""
        return self.images_per_sec / self.single.images_per_sec

    @property
    def comm_share(self) -> float:
        """Share of a step spent on gradient exchange at N."""
        return self.scaled.comm_share

    @property
    def threads_per_worker(self) -> int | None:
        return self.scaled.workers[0].threads

    def aggregate_measurement(self) -> Measurement:
        """The scaled run as one `Measurement` whose median is the aggregate img/s.

        One process driving all devices measured the aggregate itself. For launched workers,
        the blocks of the noisiest worker are scaled to the aggregate level: the result keeps
        that worker's block spread (the case's noise) and the common-window aggregate.
        """
        workers = self.scaled.workers
        if len(workers) == 1:
            return replace(workers[0].full, extra=self._extra())
        noisiest = max(workers, key=lambda w: w.full.rel_iqr).full
        factor = self.images_per_sec / noisiest.items_per_sec
        n = len(workers)
        return replace(
            noisiest,
            items_per_step=noisiest.items_per_step * n,
            block_seconds=tuple(n * s / factor for s in noisiest.block_seconds),
            extra=self._extra(),
        )

    def _extra(self) -> dict[str, Any]:
        return {
            "form": "data-parallel",
            "kvstore": self.kvstore,
            "world_size": self.world_size,
            "scaling": self.spec.scaling,
        }

    def scaling(self) -> Scaling:
        """The record a `~pytest_mxperf.measuring.records.CaseResult` carries of this result."""
        first = self.scaled.workers[0]
        return Scaling(
            kvstore=self.kvstore,
            world_size=self.world_size,
            single_images_per_sec=self.single.images_per_sec,
            per_worker_images_per_sec=self.per_worker_images_per_sec,
            efficiency=self.efficiency,
            comm_share=self.comm_share,
            single_comm_share=self.single.comm_share,
            wait_share=self.scaled.wait_share,
            single_rel_iqr=max(w.full.rel_iqr for w in self.single.workers),
            threads_per_worker=self.threads_per_worker,
            contexts=first.contexts,
            wall_seconds=self.single.wall_seconds + self.scaled.wall_seconds,
            kind=self.spec.scaling,
            batch_per_device=self.spec.batch_per_device,
            single_batch_per_device=self.spec.with_world(1).batch_per_device,
            total_batch=self.spec.total_batch,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kvstore": self.kvstore,
            "world_size": self.world_size,
            "scaling": self.spec.scaling,
            "batch_per_device": self.spec.batch_per_device,
            "total_batch": self.spec.total_batch,
            "single_batch_per_device": self.spec.with_world(1).batch_per_device,
            "speedup": self.speedup,
            "images_per_sec": self.images_per_sec,
            "per_worker_images_per_sec": list(self.per_worker_images_per_sec),
            "single_images_per_sec": self.single.images_per_sec,
            "efficiency": self.efficiency,
            "comm_share": self.comm_share,
            "wait_share": self.scaled.wait_share,
            "threads_per_worker": self.threads_per_worker,
            "single": self.single.as_dict(),
            "scaled": self.scaled.as_dict(),
            "spec": self.spec.as_dict(),
        }
