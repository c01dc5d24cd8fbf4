"""``mxperf.pipeline`` and ``mxperf.training(data=...)``: data-source and end-to-end cases
measured through the fixture's case path (the timing
loops are in `pytest_mxperf.pipelines.pipeline`)."""

from __future__ import annotations

from typing import Any

from pytest_mxperf.case.path import CaseBench
from pytest_mxperf.config import parsers
from pytest_mxperf.measuring.measure import MeasureConfig
from pytest_mxperf.measuring.protocol import PrepareSpec
from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.measuring.runner import CaseRun
from pytest_mxperf.pipelines import pipeline as pipelines


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
            bench, source(**{setting: v}), batch_size, model, pipelines.point_name(setting, v, name)
        )
        for v in values
    ]
    return max(results, key=lambda r: r.images_per_sec or -1.0)


def _sweep(bench: CaseBench, sweep: Any) -> tuple[str, tuple[Any, ...]] | None:
    return parsers.parse_sweep(sweep) if sweep is not None else bench._marker.sweep


def _peek(bench: CaseBench, source: Any) -> tuple[int, ...]:
    clock, timeout = bench._backend.clock, bench._settings.pipeline_timeout
    return pipelines.peek_shape(source, clock=clock, timeout=timeout)


def pipeline_case(
    bench: CaseBench, source: Any, batch_size: int | None, model: str | None, name: str | None
) -> CaseResult:
    size = batch_size or pipelines.declared_batch(source) or _peek(bench, source)[0]
    timeout = bench._settings.pipeline_timeout

    def runner(spec: PrepareSpec, config: MeasureConfig, attempts: int, again: Any) -> CaseRun:
        return pipelines.run_pipeline(
            bench._backend,
            source,
            config,
            timeout=timeout,
            images=size,
            attempts=attempts,
            again=again,
        )

    ctx = bench._backend.context("cpu", 0)  # decoding runs on the host
    return bench._case(source, "pipeline", size, model=model, name=name, ctx=ctx, runner=runner)


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
    if batch_size is not None and batch_size != shape[0]:
        raise pipelines.PipelineError(
            f"batch_size={batch_size} but the source yields batches of {shape[0]}"
        )
    options.setdefault("input_shape", shape[1:])
    model, name = options.pop("model", None), options.pop("name", None) or "e2e"
    points: list[tuple[str, float | None]] = []
    for value in plan[1] if plan is not None else ():
        point = pipelines.point_name(plan[0], value)  # type: ignore[index]
        swept = pipeline_case(bench, data(**{plan[0]: value}), shape[0], model, point)  # type: ignore[index]
        points.append((point, swept.images_per_sec))
    timeout = bench._settings.pipeline_timeout

    def runner(spec: PrepareSpec, config: MeasureConfig, attempts: int, again: Any) -> CaseRun:
        return pipelines.run_end_to_end(
            bench._backend,
            net,
            source,
            spec,
            config,
            timeout=timeout,
            attempts=attempts,
            again=again,
        )

    def after(result: CaseResult) -> None:
        m, verdict = result.measurement, result.verdict
        if m is None or verdict is None or "model_alone" not in m.extra:
            return
        pipe = m.extra.get("pipeline_alone")
        bound = pipelines.decide_input_bound(
            m,
            pipelines.Figure(**m.extra["model_alone"]),
            None if pipe is None else pipelines.Figure(**pipe),
        )
        if bound is not None:
            text = pipelines.explain_input_bound(str(result.key), bound, points)
            result.verdict = pipelines.input_bound_verdict(verdict, text)

    return bench._case(
        net,
        "training",
        shape[0],
        model=model,
        name=name,
        runner=runner,
        after=after,
        **options,
    )
