"""Input pipelines: the throughput of a data source alone (train_imagenet's ``--test-io``),
end-to-end training on its batches, and the input-bound verdict.

Nothing here imports MXNet at module level: a source is anything iterable (an ``mx.io.DataIter``,
a ``gluon.data.DataLoader``, a list of batches) and MXNet is reached through the back end.
The step the timing engine sees is "fetch the next batch and wait for it"; fetching runs in one
helper thread so a source that never delivers is stopped by ``--mxperf-pipeline-timeout``
instead of hanging the run.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_mxperf.measure import MeasureConfig, Measurement, measure
from pytest_mxperf.protocol import Backend, PrepareSpec, SpecError
from pytest_mxperf.records import Outcome, Status, Verdict
from pytest_mxperf.runner import USAGE_ERRORS, CaseRun, record_failure, run_case

#: End-to-end below the model alone by more than this many times the noise is input-bound.
NOISE_FACTOR = 2.0
#: ... and by at least this much, whatever the noise.
MIN_GAP = 0.05
#: Shortest timed block of a data source alone, in seconds.
PIPELINE_BLOCK_TIME = 0.5


class PipelineError(SpecError):
    """A source that cannot be measured as handed (empty, batches of another size than
    declared, not restartable): a usage error naming what is wrong."""


class PipelineTimeout(RuntimeError):
    """The source delivered no batch within ``--mxperf-pipeline-timeout``."""


# batches ----------------------------------------------------------------------------------------
def batch_arrays(batch: Any) -> list[Any]:
    """The arrays of a batch: an ``mx.io.DataBatch`` (data, then label), a list/tuple (flattened),
    or one array."""
    if hasattr(batch, "data") and isinstance(getattr(batch, "data", None), (list, tuple)):
        return [*batch.data, *(batch.label or [])]
    if isinstance(batch, (list, tuple)):
        return [a for item in batch for a in batch_arrays(item)]
    return [batch]


def batch_images(batch: Any) -> int:
    """Images in a batch: the first dimension of its first array."""
    arrays = batch_arrays(batch)
    shape = getattr(arrays[0], "shape", None) if arrays else None
    if not shape:
        raise PipelineError(
            f"a batch of the source has no array to count images in (got {type(batch).__name__}); "
            "yield arrays, (data, label) tuples or mx.io.DataBatch objects"
        )
    return int(shape[0])


def wait_for(batch: Any) -> None:
    """Wait until the batch's arrays are computed (MXNet is asynchronous)."""
    for arr in batch_arrays(batch):
        wait = getattr(arr, "wait_to_read", None)
        if wait is not None:
            wait()


def declared_batch(source: Any) -> int | None:
    """The batch size a source says it yields (``DataIter.batch_size``, a DataLoader's batch
    sampler), or None."""
    size = getattr(source, "batch_size", None)
    if size is None:
        size = getattr(getattr(source, "_batch_sampler", None), "_batch_size", None)
    return int(size) if isinstance(size, int) and size > 0 else None


# fetching ---------------------------------------------------------------------------------------
class _FetchThread:
    """Runs fetches in one daemon thread so a caller can stop waiting; a fetch that times out
    leaves the thread stuck in the source, and the case ends there."""

    def __init__(self) -> None:
        self._requests: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self._results: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="mxperf-fetch", daemon=True)
        self._thread.start()
        self.stuck = False

    def _loop(self) -> None:
        while True:
            fn = self._requests.get()
            if fn is None:
                return
            try:
                self._results.put((True, fn()))
            except BaseException as exc:  # handed back to the caller as it is
                self._results.put((False, exc))

    def call(self, fn: Callable[[], Any], timeout: float) -> Any:
        if self.stuck:
            raise PipelineTimeout("the source is still busy with an earlier batch")
        self._requests.put(fn)
        try:
            ok, value = self._results.get(timeout=timeout)
        except queue.Empty:
            self.stuck = True
            raise PipelineTimeout(
                f"the source delivered no batch within {timeout:g} s (--mxperf-pipeline-timeout)"
            ) from None
        if not ok:
            raise value
        return value

    def close(self) -> None:
        if not self.stuck:
            self._requests.put(None)


class Fetcher:
    """The next batch of a source across epochs: at the end of an epoch the source is reset
    (``reset()`` for a DataIter, a new iterator otherwise) and the time that takes is kept apart,
    so an epoch end is never counted as throughput."""

    def __init__(
        self,
        source: Any,
        *,
        clock: Callable[[], float],
        timeout: float,
        images: int | None = None,
    ) -> None:
        self.source = source
        self.clock = clock
        self.timeout = timeout
        self.images = images
        self.batches = 0
        self.resets = 0
        self.reset_seconds = 0.0
        self._in_epoch = 0
        self._it: Iterator[Any] | None = None
        self._thread = _FetchThread()

    def _next(self) -> Any:
        if self._it is None:
            self._it = iter(self.source)
        try:
            batch = next(self._it)
        except StopIteration:
            if self._in_epoch == 0:
                raise PipelineError("the source is empty: it yielded no batch") from None
            start = self.clock()
            reset = getattr(self.source, "reset", None)
            if callable(reset):
                reset()
            self._it = iter(self.source)
            self.resets += 1
            self._in_epoch = 0
            self.reset_seconds += self.clock() - start
            try:
                batch = next(self._it)
            except StopIteration:
                raise PipelineError(
                    f"the source ended after {self.batches} batch(es) and cannot be restarted "
                    "(a generator or an exhausted iterator): pass a re-iterable source such as "
                    "a DataLoader or a list, or a DataIter with reset()"
                ) from None
        wait_for(batch)
        self._in_epoch += 1
        return batch

    def fetch(self) -> Any:
        """The next batch, waited for; a batch of another size than declared is a usage error."""
        batch = self._thread.call(self._next, self.timeout)
        n = batch_images(batch)
        if self.images is None:
            self.images = n
        elif n != self.images:
            raise PipelineError(
                f"the source yielded a batch of {n} images after batches of {self.images} "
                f"(batch {self.batches + 1}); every batch must have the declared size "
                "(for a DataLoader pass last_batch='discard' or 'rollover')"
            )
        self.batches += 1
        return batch

    def timed_clock(self) -> float:
        """The clock minus the time spent resetting the source at epoch ends."""
        return self.clock() - self.reset_seconds

    def close(self) -> None:
        self._thread.close()


def slow_warning(seconds: float, max_time: float) -> str:
    return (
        f"the source takes {seconds:.3g} s per batch, more than --mxperf-max-time "
        f"({max_time:g} s): measured over one batch"
    )


def measure_source(
    fetcher: Fetcher, sync: Callable[[], object], config: MeasureConfig
) -> tuple[Measurement, list[str]]:
    """Measure a source's batches per second (items: images per batch). A source slower than
    ``max_time`` per batch is measured over a single batch (after the first, which pays the
    start-up) and flagged in the returned warnings."""
    start = fetcher.timed_clock()
    fetcher.fetch()  # learns the batch size; the engine's own first step is timed apart anyway
    first = fetcher.timed_clock() - start
    notes: list[str] = []
    if first > config.max_time:
        start = fetcher.timed_clock()
        fetcher.fetch()
        one = fetcher.timed_clock() - start
        if one > config.max_time:
            assert fetcher.images is not None
            m = Measurement(
                items_per_step=fetcher.images,
                steps_per_block=1,
                block_seconds=(max(one, 1e-9),),
                warmup_steps=1,
                warmup_seconds=first,
                warmup_steady=False,
                first_step_seconds=first,
                sync_seconds=0.0,
            )
            return m, [slow_warning(one, config.max_time)]
    assert fetcher.images is not None
    m = measure(
        fetcher.fetch,
        items_per_step=fetcher.images,
        sync=sync,
        clock=fetcher.timed_clock,
        config=config,
    )
    return m, notes


def source_info(fetcher: Fetcher) -> dict[str, Any]:
    return {
        "form": "pipeline",
        "source": type(fetcher.source).__name__,
        "batches": fetcher.batches,
        "epoch_resets": fetcher.resets,
        "reset_seconds": fetcher.reset_seconds,
    }


def run_pipeline(
    backend: Backend,
    source: Any,
    config: MeasureConfig,
    *,
    timeout: float,
    images: int | None = None,
    attempts: int = 1,
    again: Callable[[Measurement], bool] = lambda m: False,
) -> CaseRun:
    """`runner.run_case` for a data source: its images/sec alone, the best of up to
    ``attempts``. The source's own exceptions (and a timeout) make the case an error row whose
    message is the source's error; `PipelineError` (bad usage) propagates."""
    run = CaseRun()
    fetcher = Fetcher(source, clock=backend.clock, timeout=timeout, images=images)
    # Batch times of a pipeline vary more than a model's (crop sizes, worker hand-offs):
    # longer blocks keep the spread of their rates judgeable.
    config = replace(config, block_time=max(config.block_time, PIPELINE_BLOCK_TIME))
    try:
        for i in range(attempts):
            m, notes = measure_source(fetcher, backend.sync, config)
            run.attempts.append(m.items_per_sec)
            run.warnings = notes
            if run.measurement is None or m.items_per_sec > run.measurement.items_per_sec:
                run.measurement = replace(m, extra=source_info(fetcher))
            if notes or (i + 1 < attempts and not again(run.measurement)):
                break
    except Exception as exc:
        if isinstance(exc, USAGE_ERRORS):
            raise
        run.status, run.measurement = Status.ERROR, None
        run.error = f"{type(exc).__name__}: {exc}"
    finally:
        fetcher.close()
        with contextlib.suppress(Exception):
            backend.sync()
    return run


# sweeps -----------------------------------------------------------------------------------------
def parse_sweep(sweep: Any) -> tuple[str, tuple[Any, ...]] | None:
    """``{"preprocess_threads": [1, 2, 4]}`` -> ``("preprocess_threads", (1, 2, 4))``."""
    if sweep is None:
        return None
    if not isinstance(sweep, Mapping) or len(sweep) != 1:
        raise ValueError(
            f"sweep must map one setting to its values, e.g. {{'num_workers': [0, 2]}}; "
            f"got {sweep!r}"
        )
    ((name, values),) = sweep.items()
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"sweep: the setting must be a keyword name, got {name!r}")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"sweep: {name} needs a non-empty list of values, got {values!r}")
    if len(set(map(str, values))) != len(values):
        raise ValueError(f"sweep: {name} lists a value twice: {list(values)!r}")
    return name, tuple(values)


def point_name(setting: str, value: Any, name: str | None = None) -> str:
    """The case-key name of one sweep point: ``preprocess_threads=4`` (after the user's name)."""
    point = f"{setting}={value}".replace("/", "_")
    return f"{name}-{point}" if name else point


# end-to-end training ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Figure:
    """One figure measured beside a case (the model alone, the pipeline alone)."""

    images_per_sec: float
    rel_iqr: float

    @classmethod
    def of(cls, m: Measurement) -> Figure:
        return cls(m.items_per_sec, m.rel_iqr)

    def as_dict(self) -> dict[str, float]:
        return {"images_per_sec": self.images_per_sec, "rel_iqr": self.rel_iqr}


def gluon_data_step(mx: Any, net: Any, spec: PrepareSpec, fetch: Callable[[], Any]) -> Any:
    """A training step on the source's batches, as a real loop does: fetch, copy data (and
    labels) to the context, forward, backward, optimizer update. The net is already
    initialized and hybridized by the model-alone measurement."""
    from pytest_mxperf import mxmodels

    if not isinstance(net, mx.gluon.Block):
        raise SpecError(
            f"data= needs a Gluon Block to train (got {type(net).__name__}); Symbol models "
            "train on synthetic data only"
        )
    ctx = spec.ctx
    loss_fn = spec.loss or mx.gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = mx.gluon.Trainer(
        net.collect_params(), spec.optimizer, mxmodels.optimizer_params(spec), kvstore=None
    )
    classes: dict[str, int] = {}
    last: dict[str, Any] = {}

    def step() -> None:
        arrays = batch_arrays(fetch())
        x = arrays[0].as_in_context(ctx) if hasattr(arrays[0], "as_in_context") else None
        if x is None:
            x = mx.nd.array(arrays[0], ctx=ctx)
        if x.dtype != spec.dtype:
            x = x.astype(spec.dtype)
        with mx.autograd.record():
            out = net(x)
            if "n" not in classes:
                classes["n"] = int(mxmodels.outputs(out)[0].shape[-1])
            if len(arrays) > 1:
                y = mx.nd.array(arrays[1], ctx=ctx) if not mxmodels.is_nd(arrays[1]) else arrays[1]
                y = y.as_in_context(ctx).reshape((-1,)) % classes["n"]
            else:
                y = mx.nd.zeros((x.shape[0],), ctx=ctx)
            value = loss_fn(out, y)
        value.backward()
        trainer.step(x.shape[0])
        last["loss"] = value

    def check() -> str | None:
        return mxmodels.finite_message("training loss", [last["loss"]]) if last else None

    step.check = check  # type: ignore[attr-defined]
    return step


def run_end_to_end(
    backend: Any,
    net: Any,
    source: Any,
    spec: PrepareSpec,
    config: MeasureConfig,
    *,
    timeout: float,
    attempts: int = 1,
    again: Callable[[Measurement], bool] = lambda m: False,
) -> CaseRun:
    """Train on the source's batches (the case's figure) after measuring, in the same process,
    the model alone on synthetic data and the pipeline alone; both go in the measurement's
    ``extra`` (``model_alone``, ``pipeline_alone``)."""
    model_run = run_case(backend, net, spec, config)
    if model_run.measurement is None:
        return model_run  # OOM or an error of the model: the case ends as that
    model_alone = Figure.of(model_run.measurement)
    pipe_run = run_pipeline(backend, source, config, timeout=timeout, images=spec.batch_size)
    if pipe_run.measurement is None:
        return pipe_run  # the source's own error
    pipe_alone = Figure.of(pipe_run.measurement)
    run = CaseRun(warnings=list(pipe_run.warnings))
    fetcher = Fetcher(source, clock=backend.clock, timeout=timeout, images=spec.batch_size)
    step: Any = None
    try:
        step = gluon_data_step(backend.mx, net, spec, fetcher.fetch)
        for i in range(attempts):
            m = measure(
                step,
                items_per_step=spec.batch_size,
                sync=backend.sync,
                clock=fetcher.timed_clock,
                config=config,
            )
            run.attempts.append(m.items_per_sec)
            if run.measurement is None or m.items_per_sec > run.measurement.items_per_sec:
                extra = {
                    **source_info(fetcher),
                    "form": "end-to-end",
                    "model_alone": model_alone.as_dict(),
                    "pipeline_alone": pipe_alone.as_dict(),
                }
                run.measurement = replace(m, extra=extra)
            if i + 1 < attempts and not again(run.measurement):
                break
        problem = step.check()
        if problem:
            run.status, run.error = Status.NAN, problem
    except Exception as exc:
        record_failure(run, backend, exc)
    finally:
        fetcher.close()
        with contextlib.suppress(Exception):
            backend.sync()
    return run


# the input-bound verdict ------------------------------------------------------------------------
@dataclass(frozen=True)
class InputBound:
    """End-to-end training measured below the model alone by more than the noise."""

    end_to_end: float
    model_alone: float
    pipeline_alone: float | None
    gap: float
    threshold: float

    @property
    def needed_speedup(self) -> float:
        """How much faster the pipeline must become to feed the model (0.3 = 30% faster)."""
        have = self.pipeline_alone or self.end_to_end
        return self.model_alone / have - 1


def decide_input_bound(
    end_to_end: Measurement, model_alone: Figure, pipeline_alone: Figure | None
) -> InputBound | None:
    """Input-bound when end-to-end img/s is below the model alone's by more than
    ``max(MIN_GAP, NOISE_FACTOR x noise)`` (noise: the larger block spread of the two) and the
    pipeline alone does not deliver clearly more than the model consumes. A fast pipeline that
    still costs end-to-end throughput shares the CPU with the model: more decoding threads
    would not help, so that is not called input-bound."""
    noise = max(end_to_end.rel_iqr, model_alone.rel_iqr)
    threshold = max(MIN_GAP, NOISE_FACTOR * noise)
    gap = 1 - end_to_end.items_per_sec / model_alone.images_per_sec
    if gap <= threshold:
        return None
    if pipeline_alone is not None and pipeline_alone.images_per_sec > model_alone.images_per_sec * (
        1 + threshold
    ):
        return None
    return InputBound(
        end_to_end=end_to_end.items_per_sec,
        model_alone=model_alone.images_per_sec,
        pipeline_alone=None if pipeline_alone is None else pipeline_alone.images_per_sec,
        gap=gap,
        threshold=threshold,
    )


def explain_input_bound(
    key: str, bound: InputBound, points: Sequence[tuple[str, float | None]] = ()
) -> str:
    """The input-bound message: both figures, how much faster the pipeline must become, and
    which swept setting (``points``: name, pipeline img/s) gets there."""
    lines = [
        f"{key}: input-bound: end-to-end {bound.end_to_end:.1f} img/s vs the model alone "
        f"{bound.model_alone:.1f} img/s on synthetic data ({-bound.gap:+.1%}, beyond the "
        f"noise threshold {bound.threshold:.1%})"
    ]
    have = (
        f"the pipeline alone delivers {bound.pipeline_alone:.1f} img/s"
        if bound.pipeline_alone is not None
        else f"end-to-end reaches {bound.end_to_end:.1f} img/s"
    )
    lines.append(
        f"{have}: it must become {bound.needed_speedup:.0%} faster (>= {bound.model_alone:.1f} "
        "img/s, more where decoding and the model share the same cores) to feed the model"
    )
    measured = [(n, r) for n, r in points if r is not None]
    if measured:
        enough = [n for n, r in measured if r >= bound.model_alone]
        table = ", ".join(f"{n}: {r:.1f}" for n, r in measured)
        if enough:
            lines.append(f"swept pipeline img/s: {table}; {enough[0]} is enough")
        else:
            best = max(measured, key=lambda p: p[1])
            lines.append(
                f"swept pipeline img/s: {table}; none is enough (best {best[0]}): more "
                "threads/workers than swept, or less work per image, are needed"
            )
    elif points:
        lines.append("no swept setting could be measured")
    else:
        lines.append(
            "sweep preprocess_threads (ImageRecordIter) or num_workers (DataLoader) with "
            "sweep={...} to see which setting gets there"
        )
    return "\n".join(lines)


def input_bound_verdict(verdict: Verdict, message: str) -> Verdict:
    """The case's verdict once found input-bound: a baseline regression (or any failure) stands,
    with the diagnosis added; otherwise the outcome becomes ``input-bound``, failing only when
    the baseline verdict failed (``--mxperf-strict`` on a new case)."""
    if verdict.outcome not in (Outcome.PASS, Outcome.NEW, Outcome.IMPROVED):
        return verdict.explained(f"{verdict.message}\n{message}")
    return replace(verdict, outcome=Outcome.INPUT_BOUND, message=f"{message}\n{verdict.message}")


def peek_shape(source: Any, *, clock: Callable[[], float], timeout: float) -> tuple[int, ...]:
    """The shape of the first array of a source's batches (``provide_data`` of a DataIter,
    else one batch fetched from a fresh iterator); a one-pass iterator cannot be peeked."""
    provided = getattr(source, "provide_data", None)
    if provided:
        return tuple(int(d) for d in provided[0].shape)
    if iter(source) is source:
        raise PipelineError(
            "a one-pass iterator (generator) cannot be measured: pass a re-iterable source "
            "(a DataLoader, a list of batches) or a DataIter with reset()"
        )
    fetcher = Fetcher(source, clock=clock, timeout=timeout)
    try:
        arrays = batch_arrays(fetcher.fetch())
    finally:
        fetcher.close()
    return tuple(int(d) for d in arrays[0].shape)
