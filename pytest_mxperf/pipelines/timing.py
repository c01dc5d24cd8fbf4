"""Measure input pipelines: a data source alone (train_imagenet's ``--test-io``), or training on it.

Nothing here imports MXNet at module level: a source is anything iterable (an ``mx.io.DataIter``,
a ``gluon.data.DataLoader``, a list of batches) and MXNet is reached through the back end.
The step the timing engine sees is "fetch the next batch and wait for it" (the fetcher is
:mod:`pytest_mxperf.pipelines.source`'s); the input-bound verdict is
:mod:`pytest_mxperf.pipelines.input_bound`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pytest_mxperf.measuring.measure import MeasureConfig, Measurement, measure
from pytest_mxperf.measuring.protocol import Backend, PrepareSpec, SpecError
from pytest_mxperf.measuring.records import Status
from pytest_mxperf.measuring.runner import (
    USAGE_ERRORS,
    CaseRun,
    best_of,
    record_failure,
    run_case,
)
from pytest_mxperf.pipelines.input_bound import Figure
from pytest_mxperf.pipelines.source import Fetcher, batch_arrays


def slow_warning(seconds: float, max_time: float, blocks: int = 1) -> str:
    how = "over one batch" if blocks == 1 else f"one batch at a time ({blocks} batches)"
    return (
        f"the source takes {seconds:.3g} s per batch, more than --mxperf-max-time "
        f"({max_time:g} s): measured {how}"
    )


def measure_source(
    fetcher: Fetcher, sync: Callable[[], object], config: MeasureConfig
) -> tuple[Measurement, list[str]]:
    """Measure a source's batches per second (items: images per batch). A source slower than
    ``max_time`` per batch is measured over a single batch (after the first, which pays the
    start-up; in a paired side's turns, a single batch a turn) and flagged in the returned
    warnings."""
    start = fetcher.timed_clock()
    fetcher.fetch()  # learns the batch size; the engine's own first step is timed apart anyway
    first = fetcher.timed_clock() - start
    notes: list[str] = []
    if first > config.max_time:
        one = _one_batch(fetcher)
        if one > config.max_time:
            assert fetcher.images is not None
            blocks = [one]
            extra: dict[str, Any] = {}
            turns = config.interleave
            if turns is not None and turns.ready():
                # A paired side in turns: its blocks are single batches, each in its turn (the
                # batch above was fetched beside the other side's work).
                extra["interleaved"] = True
                blocks = [_one_batch(fetcher)]
                while turns.next(fetcher.images / blocks[-1]):
                    blocks.append(_one_batch(fetcher))
            m = Measurement(
                items_per_step=fetcher.images,
                steps_per_block=1,
                block_seconds=tuple(blocks),
                warmup_steps=1,
                warmup_seconds=first,
                warmup_steady=False,
                first_step_seconds=first,
                sync_seconds=0.0,
                extra=extra,
            )
            return m, [slow_warning(one, config.max_time, len(blocks))]
    assert fetcher.images is not None
    m = measure(
        fetcher.fetch,
        items_per_step=fetcher.images,
        sync=sync,
        clock=fetcher.timed_clock,
        config=config,
    )
    return m, notes


def _one_batch(fetcher: Fetcher) -> float:
    """Seconds to fetch one batch (epoch resets left out)."""
    start = fetcher.timed_clock()
    fetcher.fetch()
    return max(fetcher.timed_clock() - start, 1e-9)


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
    # Batch times of a pipeline vary more than a model's: longer blocks keep the spread of
    # their rates judgeable.
    config = replace(config, block_time=max(config.block_time, config.source_block_time))

    def attempt() -> Measurement:
        m, run.warnings = measure_source(fetcher, backend.sync, config)
        return m

    def keep(m: Measurement) -> Measurement:
        # (``interleaved``, from measuring in turns, is the paired run's to read)
        return replace(m, extra={**m.extra, **source_info(fetcher)})

    try:
        # A source measured over single batches (it said so) is not measured again.
        best_of(run, attempt, attempts, lambda best: not run.warnings and again(best), keep)
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
def point_name(setting: str, value: Any, name: str | None = None) -> str:
    """The case-key name of one sweep point: ``preprocess_threads=4`` (after the user's name)."""
    point = f"{setting}={value}".replace("/", "_")
    return f"{name}-{point}" if name else point


# end-to-end training ----------------------------------------------------------------------------
def gluon_data_step(mx: Any, net: Any, spec: PrepareSpec, fetch: Callable[[], Any]) -> Any:
    """A training step on the source's batches, as a real loop does: fetch, copy data (and
    labels) to the context, forward, backward, optimizer update. The net is already
    initialized and hybridized by the model-alone measurement."""
    from pytest_mxperf.backend import models as mxmodels

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


#: What an end-to-end case measures beside its training, in its measurement's ``extra``: the
#: model alone on synthetic data and the pipeline alone. A paired side's later rounds leave them
#: out (`run_end_to_end`); the controller carries its first round's into the case's figures.
ALONE_FIGURES = ("model_alone", "pipeline_alone")


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
    ``extra`` (`ALONE_FIGURES`).

    A paired side's later rounds (``config`` carries the case's block plan from its first
    round, ``steps_per_block``: the training's) time the training only: the pair compares that
    figure alone, and the model alone and the pipeline alone, which the first round measured,
    were most of each later turn (docs/measurements.md). The net is then only made ready
    (initialized, hybridized) as the model alone's run would have made it."""
    later_round = config.steps_per_block is not None
    alone: dict[str, Any] = {}
    run = CaseRun()
    if later_round:
        try:
            backend.prepare(net, spec)
        except Exception as exc:
            record_failure(run, backend, exc)
            return run
    else:
        model_run = run_case(backend, net, spec, config)
        if model_run.measurement is None:
            return model_run  # OOM or an error of the model: the case ends as that
        pipe_run = run_pipeline(backend, source, config, timeout=timeout, images=spec.batch_size)
        if pipe_run.measurement is None:
            return pipe_run  # the source's own error
        alone = {
            "model_alone": Figure.of(model_run.measurement).as_dict(),
            "pipeline_alone": Figure.of(pipe_run.measurement).as_dict(),
        }
        run.warnings.extend(pipe_run.warnings)
    fetcher = Fetcher(source, clock=backend.clock, timeout=timeout, images=spec.batch_size)
    step: Any = None
    try:
        step = gluon_data_step(backend.mx, net, spec, fetcher.fetch)

        def attempt() -> Measurement:
            return measure(
                step,
                items_per_step=spec.batch_size,
                sync=backend.sync,
                clock=fetcher.timed_clock,
                config=config,
            )

        def keep(m: Measurement) -> Measurement:
            return replace(m, extra={**source_info(fetcher), "form": "end-to-end", **alone})

        best_of(run, attempt, attempts, again, keep)
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
