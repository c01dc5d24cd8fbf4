"""``mxperf.pipeline`` and ``mxperf.training(data=...)``: data-source and end-to-end cases
measured through the fixture's case path (the timing
loops are in `pytest_mxperf.pipelines.timing`)."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest

from pytest_mxperf.case.bench import Runner
from pytest_mxperf.case.path import CaseBench
from pytest_mxperf.config import parsers
from pytest_mxperf.measuring.measure import MeasureConfig
from pytest_mxperf.measuring.protocol import PrepareSpec
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.measuring.runner import USAGE_ERRORS, CaseRun
from pytest_mxperf.measuring.verdicts import Finding
from pytest_mxperf.pipelines import input_bound, timing
from pytest_mxperf.pipelines import source as sources


def pipeline(
    bench: CaseBench,
    source: Any,
    *,
    batch_size: int | None,
    model: str | None,
    name: str | None,
    sweep: Any,
) -> CaseResult:
    """`MxPerf.pipeline` (its docstring and defaults) with the object first."""
    plan = _sweep(bench, sweep)
    if plan is None:
        return pipeline_case(bench, source, batch_size, model, name)
    setting, values = plan
    if not callable(source):
        raise TypeError(f"with sweep=, pass a factory taking {setting}=, not a source")
    results = [
        pipeline_case(
            bench, source(**{setting: v}), batch_size, model, timing.point_name(setting, v, name)
        )
        for v in values
    ]
    return max(results, key=lambda r: r.images_per_sec or -1.0)


def _sweep(bench: CaseBench, sweep: Any) -> tuple[str, tuple[Any, ...]] | None:
    return parsers.parse_sweep(sweep) if sweep is not None else bench.marker.sweep


def _peek(bench: CaseBench, source: Any) -> tuple[int, ...] | str:
    """The shape of the source's first batch, or why it gave none (a timeout, the source's own
    exception: what makes a later batch's case an ERROR row); usage errors propagate."""
    clock, timeout = bench.backend.clock, bench.settings.pipeline_timeout
    try:
        return sources.peek_shape(source, clock=clock, timeout=timeout)
    except USAGE_ERRORS:
        raise
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def _no_first_batch(what: str, why: str, learn: str) -> NoReturn:
    """No case key without a batch size: the failure alone, in one message."""
    pytest.fail(
        f"mxperf: {what}: {why}, fetching its first batch to learn {learn}; pass batch_size= "
        "to measure it as a case (an ERROR row)",
        pytrace=False,
    )


def _errored(error: str) -> Runner:
    """A runner for a case whose source failed before measuring: an ERROR row with its error."""

    def runner(spec: PrepareSpec, config: MeasureConfig, attempts: int, again: Any) -> CaseRun:
        return CaseRun(status=Status.ERROR, error=error)

    return runner


def pipeline_case(
    bench: CaseBench, source: Any, batch_size: int | None, model: str | None, name: str | None
) -> CaseResult:
    size = batch_size or sources.declared_batch(source)
    if size is None:
        peeked = _peek(bench, source)
        if isinstance(peeked, str):
            _no_first_batch(f"pipeline {bench.label(model)}", peeked, "the batch size")
        size = peeked[0]
    timeout = bench.settings.pipeline_timeout

    def runner(spec: PrepareSpec, config: MeasureConfig, attempts: int, again: Any) -> CaseRun:
        return timing.run_pipeline(
            bench.backend,
            source,
            config,
            timeout=timeout,
            images=size,
            attempts=attempts,
            again=again,
        )

    ctx = bench.backend.context("cpu", 0)  # decoding runs on the host
    # In a paired run's lock-step sides: a source that works only when asked for a batch is
    # timed block by block in turns (the machine's drift over seconds cancels, as for a
    # model), on every CPU the side may use; any other in a turn of its own.
    in_turns = sources.fetches_only_when_asked(source)
    return bench.case(
        source,
        "pipeline",
        size,
        model=model,
        name=name,
        ctx=ctx,
        runner=runner,
        alone=not in_turns,
        wide=in_turns,
    )


def _input_bound(result: CaseResult, points: list[tuple[str, float | None]]) -> Finding | None:
    """What an end-to-end case's figures say beside its verdict: input-bound when its training
    measured below the model alone (``points``: a swept setting's img/s, named in the
    message); None when they do not."""
    m = result.measurement
    if m is None or "model_alone" not in m.extra:
        return None
    pipe = m.extra.get("pipeline_alone")
    bound = input_bound.decide_input_bound(
        m,
        input_bound.Figure(**m.extra["model_alone"]),
        None if pipe is None else input_bound.Figure(**pipe),
    )
    return None if bound is None else input_bound.input_bound_finding(result.key, bound, points)


def _unread(
    bench: CaseBench, net: Any, size: int | None, why: str, options: dict[str, Any]
) -> CaseResult:
    """An end-to-end case whose source gave no first batch (``why``): as a timeout at a later
    batch, an ERROR row when the batch size is known."""
    model, name = options.pop("model", None), options.pop("name", None) or "e2e"
    if size is None:
        _no_first_batch(f"training {bench.label(model)} (data=)", why, "its shape")
    return bench.case(
        net, "training", size, model=model, name=name, runner=_errored(why), **options
    )


def end_to_end(
    bench: CaseBench,
    net: Any,
    data: Any,
    batch_size: int | None,
    sweep: Any,
    options: dict[str, Any],
) -> CaseResult:
    plan = _sweep(bench, sweep)
    if plan is not None and not callable(data):
        raise TypeError(f"with sweep=, pass data= as a factory taking {plan[0]}=")
    source = data() if plan is not None else data
    shape = _peek(bench, source)
    if isinstance(shape, str):
        return _unread(bench, net, batch_size or sources.declared_batch(source), shape, options)
    if batch_size is not None and batch_size != shape[0]:
        raise sources.PipelineError(
            f"batch_size={batch_size} but the source yields batches of {shape[0]}"
        )
    options.setdefault("input_shape", shape[1:])
    model, name = options.pop("model", None), options.pop("name", None) or "e2e"
    points: list[tuple[str, float | None]] = []
    for value in plan[1] if plan is not None else ():
        point = timing.point_name(plan[0], value)  # type: ignore[index]
        swept = pipeline_case(bench, data(**{plan[0]: value}), shape[0], model, point)  # type: ignore[index]
        points.append((point, swept.images_per_sec))
    timeout = bench.settings.pipeline_timeout

    def runner(spec: PrepareSpec, config: MeasureConfig, attempts: int, again: Any) -> CaseRun:
        return timing.run_end_to_end(
            bench.backend,
            net,
            source,
            spec,
            config,
            timeout=timeout,
            attempts=attempts,
            again=again,
        )

    def finds(result: CaseResult) -> Finding | None:
        return _input_bound(result, points)

    # A turn of its own in a paired run's lock-step sides: timed in turns, one side came out
    # ahead in every A/A round (a bias of unknown cause; docs/measurements.md, "Paired runs").
    return bench.case(
        net,
        "training",
        shape[0],
        model=model,
        name=name,
        runner=runner,
        finds=finds,
        alone=True,
        **options,
    )
