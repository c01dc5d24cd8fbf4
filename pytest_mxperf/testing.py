"""A fake back end with a virtual clock, for testing suites and the plugin without MXNet.

Override the ``mxperf_backend`` fixture in a conftest::

    from pytest_mxperf.testing import FakeBackend, FakeModel

    @pytest.fixture
    def mxperf_backend():
        return FakeBackend()

    def test_toy(mxperf):
        mxperf.inference(FakeModel(images_per_sec=500), batch_size=8, model="toy")

Every step advances the clock by ``batch_size / images_per_sec`` seconds, so results are exact
and tests never depend on the speed of the machine.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_mxperf.measure import Measurement
from pytest_mxperf.memory import MemoryMethod, MemoryRecord
from pytest_mxperf.protocol import ModelTypeError, Prepared, PrepareSpec, looks_like_oom

if TYPE_CHECKING:
    from pytest_mxperf.dataparallel import DataParallelSpec
    from pytest_mxperf.dp_result import DataParallelResult

#: MXNet's message when cudaMalloc fails (src/storage/pooled_storage_manager.h).
OOM_MESSAGE = (
    "[12:00:00] src/storage/./pooled_storage_manager.h:161: cudaMalloc retry failed: out of memory"
)


CALLABLE_SECONDS = 0.001


def measurement_of(images_per_sec: float, rel_iqr: float = 0.0) -> Measurement:
    """A `Measurement` of three blocks whose median is ``images_per_sec`` and whose relative
    IQR is ``rel_iqr``: for tests of verdicts and reports that need exact figures."""
    rates = [images_per_sec * (1 - rel_iqr), images_per_sec, images_per_sec * (1 + rel_iqr)]
    return Measurement(
        items_per_step=1,
        steps_per_block=1,
        block_seconds=tuple(1 / r for r in rates),
        warmup_steps=12,
        warmup_seconds=0.5,
        warmup_steady=True,
        first_step_seconds=0.1,
        sync_seconds=1e-5,
    )


@dataclass(frozen=True)
class FakeArray:
    """A batch array for fake data sources: only its shape is read (images = ``shape[0]``)."""

    shape: tuple[int, ...]


class MXNetError(Exception):
    """Stands in for ``mxnet.base.MXNetError``."""


@dataclass
class FakeModel:
    """A model whose speed is declared: training is ``train_factor`` times slower."""

    images_per_sec: float
    train_factor: float = 3.0
    jitter: float = 0.0
    oom_from_batch: int | None = None
    nan: bool = False
    first_step_seconds: float = 0.5
    seed: int = 0
    #: Data-parallel runs: the efficiency at any world size > 1; the lost time is exchange
    #: (the communication share at N is ``1 - scaling``).
    scaling: float = 1.0
    #: Data-parallel runs: worker 1 dies with this output (a `RankFailed`), when set.
    rank_failure: str | None = None
    #: As if counted from a graph (None: no graph, like a plain callable).
    macs_per_image: int | None = None
    #: What the fake profiler reports: operator -> (runs per step, share of the step's time).
    operators: dict[str, tuple[int, float]] = field(
        default_factory=lambda: {"FullyConnected": (1, 1.0)}
    )
    #: The peak memory the fake memory probe reports for the case (MiB).
    memory_mb: float = 64.0


@dataclass(frozen=True)
class FakeContext:
    device_type: str
    device_id: int = 0


class FakeBackend:
    """A `pytest_mxperf.protocol.Backend` on a virtual clock: every step of a `FakeModel`
    advances it by ``batch_size / images_per_sec`` seconds."""

    def __init__(self, gpus: int = 0, software: dict[str, Any] | None = None) -> None:
        self.now = 0.0
        self.gpus = gpus
        self.syncs = 0
        self.peak: float | None = 100.0
        self.peak_probes: list[tuple[tuple[str, int], str]] = []
        self._software = software or {"mxnet": "fake-1.9.1", "python": "3.11", "numpy": "1.23"}
        #: Every step, sync and profiler call in order: ``("step", profiling)``, ``("sync",)``,
        #: ``("profiler", call)``, so tests can see where profiling ran.
        self.log: list[tuple[Any, ...]] = []
        #: ``mx``-like: ``self.mx.profiler`` is a fake of MXNet's profiler module (None: a back
        #: end without a profiler).
        self.mx: FakeMXNet | None = FakeMXNet(FakeProfiler(self))
        #: The peak the memory probe reports, set by ``prepare`` from the model.
        self.memory_mb = 0.0

    def clock(self) -> float:
        return self.now

    def sync(self) -> None:
        self.syncs += 1
        self.log.append(("sync",))

    def _profiling(self) -> bool:
        return self.mx is not None and self.mx.profiler.running

    def memory_probe(self, ctx: Any) -> FakeMemoryProbe:
        return FakeMemoryProbe(self, self.describe(ctx)[0])

    def num_gpus(self) -> int:
        return self.gpus

    def context(self, kind: str, index: int = 0) -> FakeContext:
        return FakeContext(kind, index)

    @staticmethod
    def describe(ctx: Any) -> tuple[str, int]:
        return str(ctx.device_type), int(ctx.device_id)

    def is_oom(self, exc: BaseException) -> bool:
        return looks_like_oom(exc, MXNetError)

    def software(self) -> dict[str, Any]:
        return dict(self._software)

    def prepare(self, model: Any, spec: PrepareSpec) -> Prepared:
        mode, batch_size, items_per_call = spec.mode, spec.batch_size, spec.items_per_call
        if not isinstance(model, FakeModel):
            if callable(model) and items_per_call:
                seen = {"result": False}

                self.memory_mb = 1.0

                def call() -> None:
                    self.log.append(("step", self._profiling()))
                    if model() is not None:
                        seen["result"] = True
                    self.now += CALLABLE_SECONDS  # a plain callable "takes" 1 ms per call

                return Prepared(call, items_per_call, computed=lambda: seen["result"])
            raise ModelTypeError(
                f"FakeBackend benchmarks FakeModel objects, not {type(model).__name__}"
            )
        if model.oom_from_batch is not None and batch_size >= model.oom_from_batch:
            raise MXNetError(OOM_MESSAGE)
        rng = random.Random(model.seed)
        rate = model.images_per_sec / (model.train_factor if mode != "inference" else 1.0)
        state = {"first": True}
        self.memory_mb = model.memory_mb

        def step() -> None:
            profiling = self._profiling()
            self.log.append(("step", profiling))
            if state.pop("first", False):
                self.now += model.first_step_seconds
                return
            noise = 1 + rng.uniform(-model.jitter, model.jitter)
            seconds = batch_size / rate * noise
            self.now += seconds
            if profiling and self.mx is not None:
                self.mx.profiler.record(model.operators, seconds)

        def check() -> str | None:
            return "model output contains NaN/inf (8 of 8 values)" if model.nan else None

        return Prepared(
            step,
            batch_size * (items_per_call or 1),
            check,
            info={"form": "fake"},
            macs_per_image=model.macs_per_image,
        )

    def peak_gflops(self, ctx: Any, dtype: str) -> float | None:
        """A declared peak (``self.peak``); counts the probes in ``self.peak_probes``."""
        self.peak_probes.append((self.describe(ctx), dtype))
        return self.peak

    def data_parallel(self, model: Any, spec: DataParallelSpec) -> DataParallelResult:
        """Exact figures from a `FakeModel` (see `fake_data_parallel`); with ``model`` None,
        ``spec.factory`` must return one."""
        if model is None:
            from pytest_mxperf.dp_train import load_object

            model = load_object(spec.factory)()
        if not isinstance(model, FakeModel):
            raise ModelTypeError(
                f"FakeBackend benchmarks FakeModel objects, not {type(model).__name__}"
            )
        return fake_data_parallel(model, spec)


class FakeMemoryProbe:
    """Reports the peak memory the prepared `FakeModel` declares."""

    def __init__(self, backend: FakeBackend, device: str) -> None:
        self.backend, self.device = backend, device

    def start(self) -> FakeMemoryProbe:
        return self

    def stop(self) -> MemoryRecord:
        return MemoryRecord(self.backend.memory_mb, MemoryMethod.DECLARED, self.device)


class FakeProfiler:
    """MXNet 1.9.1's profiler calls on a `FakeBackend`: aggregate statistics in its JSON
    layout (``Time -> operator -> name -> {Count, Total}``) and trace events written to the
    configured file on ``dumps``. ``fail`` makes every call raise it (a build without the
    profiler, a broken one)."""

    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.running = False
        self.filename: str | None = None
        self.fail: Exception | None = None
        self._stats: dict[str, list[float]] = {}
        self._events: list[dict[str, Any]] = []
        self._dumped = False

    def _call(self, what: str) -> None:
        self.backend.log.append(("profiler", what))
        if self.fail is not None:
            raise self.fail

    def set_config(self, **kwargs: Any) -> None:
        self._call("set_config")
        self.filename = str(kwargs.get("filename", "profile.json"))

    def set_state(self, state: str = "stop") -> None:
        self._call(f"set_state({state})")
        self.running = state == "run"

    def record(self, operators: dict[str, tuple[int, float]], seconds: float) -> None:
        """One profiled step: every operator ran ``count`` times in its share of the time."""
        for name, (count, share) in operators.items():
            stat = self._stats.setdefault(name, [0, 0.0])
            stat[0] += count
            stat[1] += share * seconds * 1000.0
            ts = len(self._events)
            self._events.append(
                {"name": name, "cat": "operator", "ph": "X", "ts": ts, "dur": 1, "pid": 0}
            )

    def dumps(self, reset: bool = False, format: str = "table") -> str:
        self._call(f"dumps({format})")
        if self.filename is not None and self._events:
            with open(self.filename, "a", encoding="utf-8") as f:
                head = "" if self._dumped else '{"traceEvents": [\n'
                f.write(head + ",\n".join(json.dumps(e) for e in self._events) + ",\n")
            self._dumped = True
            self._events = []
        if format == "json":
            ops = {n: {"Count": int(c), "Total": t} for n, (c, t) in self._stats.items()}
            text = json.dumps({"Time": {"operator": ops}, "Unit": {"Time": "ms"}})
        else:
            text = "\n".join(f"{n} {int(c)} {t:.4f}" for n, (c, t) in self._stats.items())
        if reset:
            self._stats = {}
        return text


@dataclass
class FakeMXNet:
    """What the profiling code reads of the ``mxnet`` module: ``profiler``."""

    profiler: FakeProfiler


def fake_blocks(rate: float, items_per_step: int, jitter: float) -> Measurement:
    """Five blocks of one step around ``rate`` (median exactly ``rate``, spread ``jitter``)."""
    rates = [rate * (1 + jitter * f) for f in (-1.0, -0.5, 0.0, 0.5, 1.0)]
    return Measurement(
        items_per_step=items_per_step,
        steps_per_block=1,
        block_seconds=tuple(items_per_step / r for r in rates),
        warmup_steps=12,
        warmup_seconds=0.5,
        warmup_steady=True,
        first_step_seconds=0.1,
        sync_seconds=1e-5,
    )


def fake_data_parallel(model: FakeModel, spec: DataParallelSpec) -> DataParallelResult:
    """What `FakeBackend.data_parallel` returns: exact figures from the model's declared speed.

    One device trains at ``images_per_sec / train_factor``; at N each worker (device) loses
    ``1 - scaling`` of its time to exchange, so the efficiency is ``scaling`` exactly."""
    from pytest_mxperf.dataparallel import ScalingCase, WorkerReport
    from pytest_mxperf.dp_result import DataParallelResult
    from pytest_mxperf.launch import RankFailed, RankProcess

    if model.rank_failure is not None and spec.world_size > 1:
        log = Path(f"worker-1-of-{spec.kvstore}.log")
        raise RankFailed(
            f"worker 1 (pid 0) of {spec.kvstore} with {spec.world_size} workers was killed by "
            f"SIGKILL; the other ranks were ended. Last lines of its output:\n"
            f"{model.rank_failure}",
            RankProcess("worker", 1, 0, log),
            -9,
            model.rank_failure,
        )
    single_rate = model.images_per_sec / model.train_factor
    batch = spec.batch_per_device
    threads = spec.threads_per_worker

    def case(n: int) -> ScalingCase:
        lost = model.scaling if n > 1 else 1.0
        per_device = single_rate * lost
        if spec.distributed:
            reports = tuple(
                WorkerReport(
                    rank=r,
                    contexts=spec.worker_contexts,
                    full=fake_blocks(per_device, batch, model.jitter),
                    compute=fake_blocks(single_rate, batch, model.jitter),
                    block_starts=(0.0,),
                    block_ends=(1.0,),
                    threads=threads,
                )
                for r in range(n)
            )
            return ScalingCase(n, per_device * n, 1.0, reports, 2.0)
        report = WorkerReport(
            rank=0,
            contexts=spec.contexts[:n],
            full=fake_blocks(per_device * n, batch * n, model.jitter),
            compute=None if n == 1 else fake_blocks(single_rate * n, batch * n, model.jitter),
            block_starts=(0.0,),
            block_ends=(1.0,),
            threads=threads,
        )
        return ScalingCase(n, per_device * n, 1.0, (report,), 2.0)

    return DataParallelResult(spec, case(1), case(spec.world_size))
