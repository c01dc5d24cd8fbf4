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

Also here: ``profiler`` (fakes of MXNet's profiler and memory probe for `FakeBackend`),
``unprobed`` (the real MXNet back end without the calibration and peak probes, for suites
that test something else), ``repos`` (git repositories with a fixed identity for tests and
scripts), ``procs`` (the processes a run started, for tests that end it from outside),
``fakegithub`` (GitHub's comment API on 127.0.0.1), and ``workflows`` / ``workflow_steps`` /
``workflow_actions`` / ``workflow_scenarios`` (the example user project's GitHub Actions
workflows run here, step by step, in the scenarios a user meets).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_mxperf.measuring import calibrate
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.protocol import ModelTypeError, Prepared, PrepareSpec, looks_like_oom
from pytest_mxperf.testing.profiler import FakeMemoryProbe, FakeMXNet, FakeProfiler

if TYPE_CHECKING:
    from pytest_mxperf.measuring.dp_result import DataParallelResult
    from pytest_mxperf.measuring.dp_scaling import DataParallelSpec

#: MXNet's message when cudaMalloc fails (src/storage/pooled_storage_manager.h).
OOM_MESSAGE = (
    "[12:00:00] src/storage/./pooled_storage_manager.h:161: cudaMalloc retry failed: out of memory"
)


CALLABLE_SECONDS = 0.001


def measurement_of(images_per_sec: float, rel_iqr: float = 0.0) -> Measurement:
    """A `Measurement` of three blocks whose median is ``images_per_sec`` and whose relative
    IQR is ``rel_iqr``: for tests of verdicts and reports that need exact figures."""
    rates = [images_per_sec * (1 - rel_iqr), images_per_sec, images_per_sec * (1 + rel_iqr)]
    return measurement_at(rates)


def measurement_at(rates: Sequence[float], interleaved: bool = False) -> Measurement:
    """A `Measurement` of one-image blocks at ``rates`` images/s; ``interleaved``: timed in
    turns with a paired run's other side (`pytest_mxperf.paired.turns`)."""
    return Measurement(
        items_per_step=1,
        steps_per_block=1,
        block_seconds=tuple(1 / r for r in rates),
        warmup_steps=12,
        warmup_seconds=0.5,
        warmup_steady=True,
        first_step_seconds=0.1,
        sync_seconds=1e-5,
        extra={"interleaved": True} if interleaved else {},
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
    #: A busy moment of the machine: for this long (virtual seconds) after the model is
    #: prepared, the steps between every third pair of syncs (every third timed block) take 3x
    #: their time and the others 0.8x, so blocks spread too far to judge around a faster
    #: median than the steady steps that follow (which keep ``jitter``).
    busy_for: float = 0.0
    #: Data-parallel runs: the first this many launches of the back end are measured on a busy
    #: machine, every worker's blocks spread +-90% (too far to judge); later ones keep
    #: ``jitter``.
    busy_launches: int = 0


@dataclass(frozen=True)
class FakeContext:
    device_type: str
    device_id: int = 0


class FakeBackend:
    """A `pytest_mxperf.measuring.protocol.Backend` on a virtual clock: every step of a `FakeModel`
    advances it by ``batch_size / images_per_sec`` seconds."""

    def __init__(self, gpus: int = 0, software: dict[str, Any] | None = None) -> None:
        self.now = 0.0
        self.gpus = gpus
        self.syncs = 0
        self.peak: float | None = 100.0
        #: The calibration probe's images/sec on this fake machine (`calibration_net`).
        self.calibration = 1000.0
        self.peak_probes: list[tuple[tuple[str, int], str]] = []
        self._software = software or {"mxnet": "fake-1.9.1", "python": "3.11", "numpy": "1.23"}
        #: Every step, sync and profiler call in order: ``("step", profiling)``, ``("sync",)``,
        #: ``("profiler", call)``, so tests can see where profiling ran.
        self.log: list[tuple[Any, ...]] = []
        #: ``mx``-like: ``self.mx.profiler`` is a fake of MXNet's profiler module (None: a back
        #: end without a profiler).
        self.mx: FakeMXNet | None = FakeMXNet(FakeProfiler(self.log))
        #: The peak the memory probe reports, set by ``prepare`` from the model.
        self.memory_mb = 0.0
        #: Data-parallel launches so far (`FakeModel.busy_launches`).
        self.launches = 0

    def clock(self) -> float:
        return self.now

    def sync(self) -> None:
        self.syncs += 1
        self.log.append(("sync",))

    def _profiling(self) -> bool:
        return self.mx is not None and self.mx.profiler.running

    def memory_probe(self, ctx: Any) -> FakeMemoryProbe:
        return FakeMemoryProbe(lambda: self.memory_mb, self.describe(ctx)[0])

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
        busy_until = self.now + model.busy_for
        self.memory_mb = model.memory_mb

        def step() -> None:
            profiling = self._profiling()
            self.log.append(("step", profiling))
            if state.pop("first", False):
                self.now += model.first_step_seconds
                return
            noise = 1 + rng.uniform(-model.jitter, model.jitter)
            if self.now < busy_until:
                noise = 3.0 if self.syncs % 3 == 0 else 0.8
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

    def calibration_net(self) -> Any:
        """The calibration probe: a `FakeModel` at ``self.calibration`` images/sec, its first
        step as long as the others. (A first step of 0 s sized the first warm-up window from
        1 ns a step: 100,000 steps, 800 fake seconds, about 0.1 CPU-s of every run that
        calibrates; now about 15 steps.)"""
        first = calibrate.BATCH / self.calibration
        return FakeModel(images_per_sec=self.calibration, first_step_seconds=first)

    def peak_gflops(self, ctx: Any, dtype: str) -> float | None:
        """A declared peak (``self.peak``); counts the probes in ``self.peak_probes``."""
        self.peak_probes.append((self.describe(ctx), dtype))
        return self.peak

    def data_parallel(self, model: Any, spec: DataParallelSpec) -> DataParallelResult:
        """Exact figures from a `FakeModel` (see `fake_data_parallel`); with ``model`` None,
        ``spec.factory`` must return one."""
        if model is None:
            from pytest_mxperf.distributed.train import load_object

            model = load_object(spec.factory)()
        if not isinstance(model, FakeModel):
            raise ModelTypeError(
                f"FakeBackend benchmarks FakeModel objects, not {type(model).__name__}"
            )
        self.launches += 1
        if self.launches <= model.busy_launches:
            model = replace(model, jitter=0.9)
        return fake_data_parallel(model, spec)


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
    from pytest_mxperf.distributed.launch import RankFailed, RankProcess
    from pytest_mxperf.measuring.dp_result import DataParallelResult
    from pytest_mxperf.measuring.dp_scaling import ScalingCase, WorkerReport

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
    threads = spec.threads_per_worker

    def case(n: int) -> ScalingCase:
        batch = spec.with_world(n).batch_per_device  # strong scaling: the total split over n
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
