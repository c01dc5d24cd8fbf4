"""A data-parallel case's spec, its workers' reports, and the scaling arithmetic over them.

Data-parallel training throughput on MXNet's own kvstore:

The same model is trained on N devices of one process (``local``/``device``/``nccl`` kvstore) or
on N worker processes with S parameter servers (``dist_sync``, ``dist_device_sync``,
``dist_async``), each device with the same batch (weak scaling), or with a fixed total batch
split over them (strong scaling). Reported: the aggregate images/sec, the figure of every
worker, the scaling efficiency img/s(N) / (N x img/s(1)) with img/s(1) measured in the same run
(one device or worker at the same per-device batch for weak scaling, at the whole total batch
for strong), and the share of a step spent on gradient exchange.

The records and the arithmetic here are pure (no MXNet). The spec is in
:mod:`pytest_mxperf.measuring.dp_spec`, the result of one run in
:mod:`pytest_mxperf.measuring.dp_result`, the training step in
:mod:`pytest_mxperf.distributed.train`, measuring in this process in
:mod:`pytest_mxperf.distributed.local`, and the process launcher in
:mod:`pytest_mxperf.distributed.launch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mxperf.measuring.dp_spec import (
    DIST_KVSTORES,
    IN_PROCESS_KVSTORES,
    DataParallelSpec,
    is_symbol_file,
    parse_context,
)
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.system import codec

__all__ = [
    "DIST_KVSTORES",
    "IN_PROCESS_KVSTORES",
    "DataParallelError",
    "DataParallelSpec",
    "ScalingCase",
    "WorkerReport",
    "aggregate",
    "comm_share",
    "common_window",
    "efficiency",
    "is_symbol_file",
    "items_in_window",
    "parse_context",
    "wait_share",
]


class DataParallelError(RuntimeError):
    """A data-parallel case could not be measured; the message says which part failed."""


@dataclass(frozen=True)
class WorkerReport:
    """What one worker process measured, with the wall-clock span of every timed block."""

    rank: int
    contexts: tuple[str, ...]
    full: Measurement
    compute: Measurement | None
    block_starts: tuple[float, ...]
    block_ends: tuple[float, ...]
    threads: int | None = None
    update_on_kvstore: bool | None = None
    pid: int = 0

    @property
    def images_per_sec(self) -> float:
        """Median images/sec of the full training step (with gradient exchange)."""
        return self.full.items_per_sec

    @property
    def items_per_block(self) -> int:
        return self.full.items_per_step * self.full.steps_per_block

    @property
    def comm_share(self) -> float:
        """Share of a step spent on exchange: 1 - compute-only time / full time (0 if none)."""
        if self.compute is None:
            return 0.0
        return comm_share(self.images_per_sec, self.compute.items_per_sec)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "contexts": list(self.contexts),
            "full": codec.to_dict(self.full),
            "compute": None if self.compute is None else codec.to_dict(self.compute),
            "block_starts": list(self.block_starts),
            "block_ends": list(self.block_ends),
            "threads": self.threads,
            "update_on_kvstore": self.update_on_kvstore,
            "pid": self.pid,
            "images_per_sec": self.images_per_sec,
            "comm_share": self.comm_share,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerReport:
        compute = data.get("compute")
        return cls(
            rank=int(data["rank"]),
            contexts=tuple(data["contexts"]),
            full=codec.from_dict(Measurement, data["full"]),
            compute=None if compute is None else codec.from_dict(Measurement, compute),
            block_starts=tuple(float(x) for x in data["block_starts"]),
            block_ends=tuple(float(x) for x in data["block_ends"]),
            threads=data.get("threads"),
            update_on_kvstore=data.get("update_on_kvstore"),
            pid=int(data.get("pid", 0)),
        )


@dataclass(frozen=True)
class ScalingCase:
    """One world size of a data-parallel run: N workers (or devices) measured together."""

    world_size: int
    images_per_sec: float
    window_seconds: float
    workers: tuple[WorkerReport, ...]
    wall_seconds: float

    @property
    def per_worker_images_per_sec(self) -> tuple[float, ...]:
        return tuple(w.images_per_sec for w in self.workers)

    @property
    def comm_share(self) -> float:
        """Mean exchange share over the workers."""
        return sum(w.comm_share for w in self.workers) / len(self.workers)

    @property
    def wait_share(self) -> float:
        """Of `comm_share`, the mean share of a step spent waiting for the slowest worker
        (`wait_share`)."""
        return wait_share(self.workers)

    def as_dict(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "images_per_sec": self.images_per_sec,
            "per_worker_images_per_sec": list(self.per_worker_images_per_sec),
            "comm_share": self.comm_share,
            "window_seconds": self.window_seconds,
            "wall_seconds": self.wall_seconds,
            "workers": [w.as_dict() for w in self.workers],
        }


# arithmetic -------------------------------------------------------------------------------------


def efficiency(single: float, aggregate: float, n: int) -> float:
    """Scaling efficiency img/s(N) / (N x img/s(1)).

    Weak scaling: img/s(1) is one device at the same per-device batch, so N x img/s(1) is what
    N independent devices would train. Strong scaling: img/s(1) is one device at the whole
    total batch, and the efficiency is the speed-up img/s(N) / img/s(1) (= t(1) / t(N) for the
    same batch) over N.
    """
    if n < 1:
        raise ValueError(f"the number of workers must be >= 1, got {n}")
    if not single > 0:
        raise ValueError(f"img/s(1) must be > 0, got {single}")
    return aggregate / (n * single)


def comm_share(full_rate: float, compute_rate: float) -> float:
    """Share of a step's time not spent computing: 1 - t(compute) / t(full), within [0, 1].

    Noise can make the full step look faster than the compute-only one; that is no negative
    communication, so it is clamped to 0.
    """
    if not (full_rate > 0 and compute_rate > 0):
        raise ValueError(f"rates must be > 0, got {full_rate} and {compute_rate}")
    return min(1.0, max(0.0, 1.0 - full_rate / compute_rate))


def wait_share(workers: Sequence[WorkerReport]) -> float:
    """Mean share of a worker's step spent waiting for the slowest worker's computation.

    Under a sync kvstore a worker's push-pull of a step returns only once every worker has
    pushed, so a worker whose compute-only step takes t(c) waits for the slowest one's
    max t(c) before the exchange itself can finish. Of a worker's full step t(f), the
    exchange share 1 - t(c)/t(f) (`comm_share`) is then ``(max t(c) - t(c)) / t(f)`` waiting
    for the slowest worker (at most the exchange share itself) and the rest kvstore push-pull.
    One worker, or a worker without a compute-only figure, waits for nobody: 0.
    """
    timed = [w for w in workers if w.compute is not None]
    if len(timed) < 2:
        return 0.0
    slowest = max(1.0 / w.compute.items_per_sec for w in timed if w.compute is not None)
    shares = []
    for w in timed:
        assert w.compute is not None
        full, compute = 1.0 / w.images_per_sec, 1.0 / w.compute.items_per_sec
        shares.append(min(max(0.0, slowest - compute), max(0.0, full - compute)) / full)
    return sum(shares) / len(workers)


def common_window(workers: Sequence[WorkerReport]) -> tuple[float, float]:
    """The wall-clock span in which every worker was inside its timed blocks."""
    if not workers:
        raise ValueError("no worker reports")
    start = max(w.block_starts[0] for w in workers)
    end = min(w.block_ends[-1] for w in workers)
    if end <= start:
        spans = ", ".join(
            f"rank {w.rank}: {w.block_starts[0]:.3f}-{w.block_ends[-1]:.3f}" for w in workers
        )
        raise DataParallelError(f"the workers' timed blocks never overlapped ({spans})")
    return start, end


def items_in_window(worker: WorkerReport, start: float, end: float) -> float:
    """Images one worker processed within [start, end], a block cut by an edge pro rata."""
    per_block = worker.items_per_block
    total = 0.0
    for b_start, b_end in zip(worker.block_starts, worker.block_ends):
        overlap = min(b_end, end) - max(b_start, start)
        if overlap > 0:
            total += per_block * overlap / (b_end - b_start)
    return total


def aggregate(workers: Sequence[WorkerReport], wall_seconds: float = 0.0) -> ScalingCase:
    """Sum the workers' images over their common window: the aggregate images/sec at N."""
    start, end = common_window(workers)
    images = sum(items_in_window(w, start, end) for w in workers)
    ordered = tuple(sorted(workers, key=lambda w: w.rank))
    return ScalingCase(len(ordered), images / (end - start), end - start, ordered, wall_seconds)
