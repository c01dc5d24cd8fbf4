"""The typed records of a run: statuses, scaling and case results (the verdict is in `verdicts`).

The case key is in `casekey`; `Outcome` and `Verdict` are re-exported from `verdicts`.

Where data leaves the process (``user_properties``, JSON, ``workerinput``, a paired side's
results file) the records go through the one codec, `pytest_mxperf.system.codec` (the edge form
of each that differs from its fields is in its ``edge_out``/``edge_in`` hooks); baseline files
are written by `pytest_mxperf.baselines.entry.BaselineRecord`. The operator profiles are the
exception inside the process: a `CaseResult` keeps them as dicts (``profile``,
``baseline_profile``), typed again (`OperatorProfile.from_dict`) where a message compares them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring import flops
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.memory import MemoryRecord
from pytest_mxperf.measuring.verdicts import Outcome as Outcome
from pytest_mxperf.measuring.verdicts import Verdict as Verdict
from pytest_mxperf.measuring.verdicts import message_lines as message_lines
from pytest_mxperf.measuring.verdicts import render_message as render_message


class Status(str, enum.Enum):
    """How a case's measurement ended."""

    OK = "ok"
    OOM = "oom"
    NAN = "nan"
    ERROR = "error"


@dataclass(frozen=True)
class Scaling:
    """What a data-parallel case adds to its result (``mxperf.data_parallel``): the aggregate
    images/sec of N workers (the case's measurement) over N x img/s(1) of one worker, measured
    in the same run, and where the time went. ``kind`` says which one worker: weak scaling, the
    same per-device batch; strong scaling, the whole total batch (then the efficiency is the
    speed-up over N)."""

    kvstore: str
    world_size: int
    #: img/s(1): one worker (or device) alone, same threads; weak: same per-device batch,
    #: strong: the whole total batch.
    single_images_per_sec: float
    per_worker_images_per_sec: tuple[float, ...]
    #: img/s(N) / (N x img/s(1)) (strong scaling: the speed-up over N).
    efficiency: float
    #: Share of a step spent exchanging gradients at N and at 1 (1 - compute-only / full time).
    comm_share: float
    single_comm_share: float = 0.0
    #: Of ``comm_share`` at N: waiting for the slowest worker's computation (sync kvstores);
    #: the rest of it is kvstore push-pull, ``1 - comm_share`` computing.
    wait_share: float = 0.0
    #: Relative IQR of the img/s(1) blocks (its noise enters the efficiency's).
    single_rel_iqr: float = 0.0
    threads_per_worker: int | None = None
    #: Devices of one worker (in-process kvstores: all N devices).
    contexts: tuple[str, ...] = ()
    #: Wall time of the whole case: both launches (or both in-process runs), start-up included.
    wall_seconds: float = 0.0
    #: ``"weak"`` or ``"strong"`` (`pytest_mxperf.config.scaling_kind`).
    kind: str = "weak"
    #: Each device's batch at N and at 1 (0: not recorded). Weak: equal; strong: total / N and
    #: the total (per device of one worker).
    batch_per_device: int = 0
    single_batch_per_device: int = 0
    #: Images of one step over all devices at N (0: not recorded).
    total_batch: int = 0


@dataclass(frozen=True)
class CaseResult:
    """One measured case, as it travels on ``user_properties`` and into JSON and baselines.

    Frozen: each step of the case path returns its part (figures, verdict, evidence) and the
    process's role (`pytest_mxperf.case.roles`) assembles the record from them once."""

    key: CaseKey
    device: str
    hardware: str
    status: Status = Status.OK
    measurement: Measurement | None = None
    attempts: list[float] = field(default_factory=list)
    threads: dict[str, Any] = field(default_factory=dict)
    software: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    nodeid: str = ""
    #: Wall-clock (start, end) of the time this case held its device: build, warm-up, blocks.
    window: list[float] = field(default_factory=list)
    #: The xdist worker that measured the case (None in a serial run).
    worker: str | None = None
    #: Why the figure may not mean what it says (e.g. a callable that computed nothing).
    warnings: list[str] = field(default_factory=list)
    verdict: Verdict | None = None
    #: Set on the points of a sweep: the curve's summary (largest fit, best, plateau, ...).
    sweep: dict[str, Any] | None = None
    #: Data-parallel cases only: per-worker figures, efficiency and communication share.
    scaling: Scaling | None = None
    #: Multiply-accumulates per image counted from the model's graph (None: no graph, e.g. a
    #: plain callable), and the matrix-multiply peak of this device and dtype in GFLOP/s.
    macs_per_image: int | None = None
    peak_gflops: float | None = None
    #: The peak memory the case's steps needed (prepare, first step, warm-up and blocks).
    memory: MemoryRecord | None = None
    #: MXNet operator profiles (`pytest_mxperf.profiles.profile_record.OperatorProfile.as_dict`)
    #: of this code and, for a regression, of the baseline's code; why a profile is missing.
    profile: dict[str, Any] | None = None
    baseline_profile: dict[str, Any] | None = None
    profile_error: str | None = None
    #: ``--mxperf-profile DIR``: the case's Chrome trace and aggregate table.
    profile_trace: str | None = None
    profile_table: str | None = None
    #: The calibration probe's images/sec measured beside this case (`--mxperf-update`: the
    #: first case of a device in each measuring process), stored with the baseline file.
    calibration: float | None = None

    # the key's parts, as the tables and grids read them
    @property
    def model(self) -> str:
        return self.key.model

    @property
    def mode(self) -> str:
        return self.key.mode

    @property
    def dtype(self) -> str:
        return self.key.dtype

    @property
    def batch_size(self) -> int:
        return self.key.batch_size

    @property
    def device_kind(self) -> str:
        return self.key.device_kind

    @property
    def images_per_sec(self) -> float | None:
        """Median images/sec over the timed blocks (None for OOM/NaN/error)."""
        return None if self.measurement is None else self.measurement.items_per_sec

    @property
    def rel_iqr(self) -> float:
        return 0.0 if self.measurement is None else self.measurement.rel_iqr

    @property
    def percent_of_peak(self) -> float | None:
        """Achieved FLOP/s (2 per MAC; training and forward+backward count the forward
        arithmetic three times) as a percentage of the measured peak, when both known."""
        rate = self.images_per_sec
        if rate is None or not self.macs_per_image or not self.peak_gflops:
            return None
        return flops.percent_of_peak(
            rate, self.macs_per_image, self.peak_gflops, flops.passes(self.mode)
        )

    def edge_out(self, data: dict[str, Any]) -> dict[str, Any]:
        """`pytest_mxperf.system.codec`: the key as its text, and the figures readers of the
        JSON report look for (% of peak, the key's parts, the peak memory) beside the fields."""
        data["percent_of_peak"] = self.percent_of_peak
        data["key"] = str(self.key)
        data["model"], data["mode"], data["dtype"] = self.model, self.mode, self.dtype
        data["batch_size"], data["device_kind"] = self.batch_size, self.device_kind
        data["name"] = self.key.name
        data["peak_memory_mb"] = None if self.memory is None else self.memory.peak_mb
        return data

    @classmethod
    def edge_in(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        """The key from its text (the key's parts beside it are derived and ignored)."""
        return {**data, "key": CaseKey.parse(str(data["key"]))}


def by_key(result: CaseResult) -> str:
    """The sort key that lists cases in the order of their keys' text (reports, summaries)."""
    return str(result.key)
