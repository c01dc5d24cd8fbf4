"""Data-parallel training throughput on MXNet's own kvstore (weak scaling).

The same model is trained on N devices of one process (``local``/``device``/``nccl`` kvstore) or
on N worker processes with S parameter servers (``dist_sync``, ``dist_device_sync``,
``dist_async``), each device with the same batch. Reported: the aggregate images/sec, the figure
of every worker, the scaling efficiency img/s(N) / (N x img/s(1)) with img/s(1) measured in the
same run, and the share of a step spent on gradient exchange.

The records and the arithmetic here are pure; MXNet is imported lazily (only the step builders
take an ``mx`` module), and the process launcher lives in :mod:`pytest_mxperf.launch`.
"""

from __future__ import annotations

import importlib
import os
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from pytest_mxperf.measure import MeasureConfig, Measurement, measure
from pytest_mxperf.records import Scaling

IN_PROCESS_KVSTORES = ("local", "device", "nccl")
DIST_KVSTORES = ("dist_sync", "dist_device_sync", "dist_async")
_CONTEXT = re.compile(r"^\s*(cpu|gpu)\s*[(:]\s*(\d+)\s*\)?\s*$")

StepHook = Callable[[], object]


class DataParallelError(RuntimeError):
    """A data-parallel case could not be measured; the message says which part failed."""


@dataclass(frozen=True)
class DataParallelSpec:
    """What to measure: one model, trained data-parallel with one kvstore.

    ``factory`` is an importable ``"package.module:function"`` returning a fresh Gluon block
    (ranks are separate processes: they import it, so it cannot be a lambda or a local).
    ``contexts`` are the devices of one process, as ``"cpu(0)"``/``"gpu(1)"``: for an in-process
    kvstore the N devices compared with the first one alone; for a dist kvstore the devices of
    every worker (default one CPU). ``step_hook`` (optional, ``"module:function"``) is called
    once per process as ``hook(kv, contexts)`` and may return a callable run after every timed
    training step (not in the compute-only step), e.g. an extra exchange.
    """

    factory: str
    batch_per_device: int
    input_shape: tuple[int, ...] = (3, 32, 32)
    kvstore: str = "dist_sync"
    workers: int = 2
    servers: int = 1
    contexts: tuple[str, ...] = ()
    num_classes: int | None = None
    optimizer: str = "sgd"
    learning_rate: float = 0.01
    step_hook: str | None = None
    threads_per_worker: int | None = None
    timeout: float = 900.0
    measure: MeasureConfig = field(default_factory=MeasureConfig)

    def __post_init__(self) -> None:
        if self.kvstore not in IN_PROCESS_KVSTORES + DIST_KVSTORES:
            known = ", ".join(IN_PROCESS_KVSTORES + DIST_KVSTORES)
            raise ValueError(f"unknown kvstore {self.kvstore!r}; choose from {known}")
        if ":" not in self.factory and not is_symbol_file(self.factory):
            raise ValueError(
                "factory must be 'package.module:function' or an exported "
                f"'PREFIX-symbol.json', got {self.factory!r}"
            )
        if self.batch_per_device < 1:
            raise ValueError(f"batch_per_device must be >= 1, got {self.batch_per_device}")
        if self.distributed and (self.workers < 1 or self.servers < 1):
            raise ValueError(f"{self.kvstore} needs workers >= 1 and servers >= 1")
        if not self.distributed and not self.contexts:
            raise ValueError(f"kvstore {self.kvstore!r} runs in one process: give contexts=")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        for text in self.contexts:
            parse_context(text)

    @property
    def distributed(self) -> bool:
        """Whether the case runs as separate worker and server processes."""
        return self.kvstore.startswith("dist")

    @property
    def world_size(self) -> int:
        """N: worker processes for a dist kvstore, devices for an in-process one."""
        return self.workers if self.distributed else len(self.contexts)

    @property
    def worker_contexts(self) -> tuple[str, ...]:
        """The devices one process trains on."""
        return self.contexts or ("cpu(0)",)

    @property
    def lockstep(self) -> bool:
        """Sync kvstores keep workers in lock-step: they must all run the same number of steps."""
        return self.distributed and "async" not in self.kvstore

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["input_shape"] = list(self.input_shape)
        data["contexts"] = list(self.contexts)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataParallelSpec:
        kwargs = dict(data)
        kwargs["input_shape"] = tuple(kwargs["input_shape"])
        kwargs["contexts"] = tuple(kwargs.get("contexts", ()))
        kwargs["measure"] = MeasureConfig(**kwargs.get("measure", {}))
        return cls(**kwargs)

    def with_world(self, n: int) -> DataParallelSpec:
        """The same case with n workers (dist) or the first n devices (in process)."""
        if self.distributed:
            return replace(self, workers=n)
        return replace(self, contexts=self.contexts[:n])


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
            "full": self.full.as_dict(),
            "compute": None if self.compute is None else self.compute.as_dict(),
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
            full=Measurement.from_dict(data["full"]),
            compute=None if compute is None else Measurement.from_dict(compute),
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
        """img/s(N) / (N x img/s(1)): 1.0 is perfect weak scaling."""
        return efficiency(self.single.images_per_sec, self.images_per_sec, self.world_size)

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
        return {"form": "data-parallel", "kvstore": self.kvstore, "world_size": self.world_size}

    def scaling(self) -> Scaling:
        """The record a `~pytest_mxperf.records.CaseResult` carries of this result."""
        first = self.scaled.workers[0]
        return Scaling(
            kvstore=self.kvstore,
            world_size=self.world_size,
            single_images_per_sec=self.single.images_per_sec,
            per_worker_images_per_sec=self.per_worker_images_per_sec,
            efficiency=self.efficiency,
            comm_share=self.comm_share,
            single_comm_share=self.single.comm_share,
            single_rel_iqr=max(w.full.rel_iqr for w in self.single.workers),
            threads_per_worker=self.threads_per_worker,
            contexts=first.contexts,
            wall_seconds=self.single.wall_seconds + self.scaled.wall_seconds,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kvstore": self.kvstore,
            "world_size": self.world_size,
            "batch_per_device": self.spec.batch_per_device,
            "images_per_sec": self.images_per_sec,
            "per_worker_images_per_sec": list(self.per_worker_images_per_sec),
            "single_images_per_sec": self.single.images_per_sec,
            "efficiency": self.efficiency,
            "comm_share": self.comm_share,
            "threads_per_worker": self.threads_per_worker,
            "single": self.single.as_dict(),
            "scaled": self.scaled.as_dict(),
            "spec": self.spec.as_dict(),
        }


# arithmetic -------------------------------------------------------------------------------------


def efficiency(single: float, aggregate: float, n: int) -> float:
    """Weak-scaling efficiency img/s(N) / (N x img/s(1))."""
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


# timing with a timeline -------------------------------------------------------------------------


class _RecordingClock:
    """A monotonic clock on the wall-clock scale that keeps every reading.

    Anchoring perf_counter to time.time once keeps it monotonic within the process while
    making readings of processes on one host comparable (the common window needs that).
    """

    def __init__(self) -> None:
        self.offset = time.time() - time.perf_counter()
        self.readings: list[float] = []

    def __call__(self) -> float:
        now = time.perf_counter() + self.offset
        self.readings.append(now)
        return now


def block_spans(
    readings: Sequence[float], durations: Sequence[float]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Find each timed block's (start, end) among a clock's readings.

    The engine reports each block as ``end - start`` of two readings of the clock it was
    given; the blocks are the last intervals, so matching exact differences from the end
    recovers them without depending on how often the engine reads the clock otherwise.
    """
    starts: list[float] = []
    ends: list[float] = []
    j = len(readings) - 1
    for seconds in reversed(durations):
        while j >= 1 and readings[j] - readings[j - 1] != seconds:
            j -= 1
        if j < 1:
            raise DataParallelError("could not find the timed blocks among the clock readings")
        starts.append(readings[j - 1])
        ends.append(readings[j])
        j -= 2
    return tuple(reversed(starts)), tuple(reversed(ends))


def measure_with_timeline(
    step: Callable[[], object],
    *,
    items_per_step: int,
    sync: Callable[[], object],
    config: MeasureConfig,
) -> tuple[Measurement, tuple[float, ...], tuple[float, ...]]:
    """:func:`~pytest_mxperf.measure.measure` plus the wall-clock span of every timed block."""
    clock = _RecordingClock()
    result = measure(step, items_per_step=items_per_step, sync=sync, clock=clock, config=config)
    starts, ends = block_spans(clock.readings, result.block_seconds)
    return result, starts, ends


# model, contexts, step --------------------------------------------------------------------------


def parse_context(text: str) -> tuple[str, int]:
    """``"gpu(1)"`` or ``"gpu:1"`` -> ("gpu", 1)."""
    found = _CONTEXT.match(text)
    if not found:
        raise ValueError(f"not a device: {text!r} (write cpu(0) or gpu(1))")
    return found.group(1), int(found.group(2))


def context_name(ctx: Any) -> str:
    """An ``mx.Context`` (or a string naming one) as ``"gpu(1)"``."""
    if isinstance(ctx, str):
        kind, index = parse_context(ctx)
    else:
        kind, index = str(ctx.device_type).replace("cpu_pinned", "cpu"), int(ctx.device_id)
    return f"{kind}({index})"


def to_context(mx: Any, text: str) -> Any:
    kind, index = parse_context(text)
    return mx.gpu(index) if kind == "gpu" else mx.cpu(index)


def load_object(ref: str) -> Any:
    """Import ``"package.module:attribute"`` (attributes may be dotted)."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected 'package.module:function', got {ref!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise DataParallelError(f"cannot import {module_name!r} for {ref!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise DataParallelError(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


def object_ref(obj: Any) -> str:
    """The ``"module:qualname"`` another process can import ``obj`` by, or a clear error."""
    if isinstance(obj, str):
        return obj
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        raise DataParallelError(
            f"{obj!r} cannot be imported by a worker process: pass a module-level function "
            "as 'package.module:function'"
        )
    return f"{module}:{qualname}"


@dataclass(frozen=True)
class TrainingStep:
    """A training step over several devices, ready for the engine."""

    step: Callable[[], object]
    items_per_step: int
    kv: Any
    update_on_kvstore: bool | None


def build_training_step(
    mx: Any,
    net: Any,
    contexts: Sequence[Any],
    spec: DataParallelSpec,
    *,
    kv: Any,
    update_on_kvstore: bool | None = None,
    hook: StepHook | None = None,
) -> TrainingStep:
    """Forward, backward and ``Trainer.step`` on every device, the Gluon multi-device way.

    A global batch of N x batch_per_device synthetic images is split over the devices once by
    ``gluon.utils.split_and_load`` (device resident, outside the timing). ``kv`` is the kvstore
    object the one ``Trainer`` uses, or None for no exchange (the compute-only step).
    """
    gluon = mx.gluon
    n = len(contexts)
    batch = spec.batch_per_device * n
    params = net.collect_params()
    for p in params.values():
        try:
            p.list_ctx()
        except RuntimeError:  # not initialized yet: deferred to the first forward
            p.initialize(ctx=list(contexts), default_init=mx.init.Xavier(magnitude=2))
    params.reset_ctx(list(contexts))
    if isinstance(net, gluon.HybridBlock):
        net.hybridize(static_alloc=True, static_shape=True)
    data = mx.nd.random.uniform(-1, 1, shape=(batch, *spec.input_shape))
    xs = gluon.utils.split_and_load(data, list(contexts))
    classes = spec.num_classes or int(net(xs[0]).shape[-1])
    labels = mx.nd.random.randint(0, classes, shape=(batch,)).astype("float32")
    ys = gluon.utils.split_and_load(labels, list(contexts))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    opt_params: dict[str, Any] = {"learning_rate": spec.learning_rate}
    if spec.optimizer.lower() in ("sgd", "nag"):
        opt_params["momentum"] = 0.9  # as train_imagenet and the inference back end
    trainer = gluon.Trainer(
        params, spec.optimizer, opt_params, kvstore=kv, update_on_kvstore=update_on_kvstore
    )
    autograd = mx.autograd

    def step() -> None:
        with autograd.record():
            losses = [loss_fn(net(x), y) for x, y in zip(xs, ys)]
        for value in losses:
            value.backward()
        trainer.step(batch)
        if hook is not None:
            hook()

    return TrainingStep(step, batch, kv, update_on_kvstore)


def make_hook(spec: DataParallelSpec, kv: Any, contexts: Sequence[Any]) -> StepHook | None:
    if spec.step_hook is None:
        return None
    hook: StepHook | None = load_object(spec.step_hook)(kv, list(contexts))
    return hook


def is_symbol_file(ref: str) -> bool:
    """Whether a factory names an exported symbol file (``HybridBlock.export``'s JSON)."""
    return ref.endswith(".json")


def load_symbol_block(path: str) -> Any:
    """A Gluon ``SymbolBlock`` from ``PREFIX-symbol.json`` (input ``data``), with the weights
    of the newest ``PREFIX-NNNN.params`` beside it when there is one (else initialized fresh:
    throughput does not depend on the weights)."""
    from pytest_mxperf.backend import import_mxnet

    symbol = Path(path)
    if not symbol.is_file():
        raise DataParallelError(f"the symbol file {path!r} does not exist")
    prefix = (
        path[: -len("-symbol.json")] if path.endswith("-symbol.json") else path[: -len(".json")]
    )
    params = sorted(Path(prefix).parent.glob(Path(prefix).name + "-*.params"))
    mx = import_mxnet()
    with warnings.catch_warnings():
        # MXNet warns that the input's dtype is unknown until the first batch: it is float32.
        warnings.filterwarnings("ignore", "Cannot decide type", UserWarning)
        return mx.gluon.SymbolBlock.imports(path, ["data"], str(params[-1]) if params else None)


def build_model(spec: DataParallelSpec) -> Any:
    if is_symbol_file(spec.factory):
        return load_symbol_block(spec.factory)
    net = load_object(spec.factory)()
    if net is None:
        raise DataParallelError(f"the factory {spec.factory!r} returned None, not a Gluon block")
    return net


# in one process ---------------------------------------------------------------------------------


def measure_in_process(spec: DataParallelSpec, net: Any = None) -> WorkerReport:
    """Train on all of ``spec.contexts`` in this process and measure full and compute-only.

    ``net`` (a Gluon block) replaces ``spec.factory`` when given: one process needs no import.
    """
    from pytest_mxperf.backend import import_mxnet

    mx = import_mxnet()
    contexts = [to_context(mx, c) for c in spec.contexts]
    net = build_model(spec) if net is None else net
    # As Trainer does with a kvstore name: one device of one machine needs no exchange.
    kv = mx.kv.create(spec.kvstore) if len(contexts) > 1 else None
    full = build_training_step(mx, net, contexts, spec, kv=kv, hook=make_hook(spec, kv, contexts))
    result, starts, ends = measure_with_timeline(
        full.step, items_per_step=full.items_per_step, sync=mx.nd.waitall, config=spec.measure
    )
    compute = None
    if kv is not None:
        local = build_training_step(mx, net, contexts, spec, kv=None)
        compute = measure(
            local.step,
            items_per_step=local.items_per_step,
            sync=mx.nd.waitall,
            config=spec.measure,
        )
    return WorkerReport(
        rank=0,
        contexts=tuple(context_name(c) for c in contexts),
        full=result,
        compute=compute,
        block_starts=starts,
        block_ends=ends,
        threads=omp_threads(),
    )


def omp_threads() -> int | None:
    """The OMP_NUM_THREADS in force in this process, if set."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() else None


def run_in_process(spec: DataParallelSpec, net: Any = None) -> DataParallelResult:
    """img/s(1) on the first device, then img/s(N) on all of them, in this process (``net``:
    one Gluon block for both, instead of two from ``spec.factory``)."""
    if spec.distributed:
        raise ValueError(f"{spec.kvstore} runs as separate processes: use data_parallel()")
    cases = []
    for n in (1, spec.world_size):
        t0 = time.perf_counter()
        report = measure_in_process(spec.with_world(n), net)
        wall = time.perf_counter() - t0
        # One process drives all N devices: its images are the aggregate.
        cases.append(
            ScalingCase(n, report.images_per_sec, sum(report.full.block_seconds), (report,), wall)
        )
    return DataParallelResult(spec, cases[0], cases[1])


def data_parallel(spec: DataParallelSpec) -> DataParallelResult:
    """Measure ``spec`` at world size 1 and N: in this process, or with launched ranks."""
    if spec.distributed:
        from pytest_mxperf.launch import run_distributed

        return run_distributed(spec)
    return run_in_process(spec)
