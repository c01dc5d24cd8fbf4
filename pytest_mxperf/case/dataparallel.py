"""``mxperf.data_parallel``: a data-parallel case measured through the back end, stored and
judged like the others (the ranks and the launcher are in `dataparallel`, `rank`, `launch`)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import pytest

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case.path import CaseBench, check_positive
from pytest_mxperf.case.stored import Judging, Tries, timing_of
from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.config.scaling_kind import STRONG, resolve_kind
from pytest_mxperf.judging.decisions import Policy, worth_another_attempt
from pytest_mxperf.judging.explain_scaling import judge_scaling
from pytest_mxperf.measuring.attempts import Attempts, oom_message
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.records import CaseResult, Outcome, Scaling, Status
from pytest_mxperf.measuring.verdicts import Judged
from pytest_mxperf.system import fingerprint

if TYPE_CHECKING:
    from pytest_mxperf.measuring.dp_scaling import DataParallelSpec


def data_parallel(
    bench: CaseBench,
    net: Any,
    /,
    *,
    batch_size: int,
    input_shape: Sequence[int],
    kvstore: str,
    workers: int,
    servers: int,
    contexts: Sequence[Any] | None,
    model: str | None,
    name: str | None,
    num_classes: int | None,
    optimizer: str,
    learning_rate: float,
    step_hook: str | None,
    threads_per_worker: int | None,
    scaling: str | None = None,
) -> CaseResult:
    """`MxPerf.data_parallel` (its docstring and defaults) with the object first."""
    from pytest_mxperf.measuring.dp_scaling import DataParallelSpec

    check_positive("batch_size", batch_size)
    kind_of_scaling = resolve_kind(scaling, bench.marker.scaling)
    in_process = not kvstore.startswith("dist")
    names = _contexts(bench, contexts, in_process)
    block, factory = _factory(net, in_process)
    settings = bench.settings
    spec = DataParallelSpec(
        factory=factory,
        batch_per_device=batch_size,
        input_shape=tuple(input_shape),
        kvstore=kvstore,
        workers=workers,
        servers=servers,
        contexts=tuple(names),
        num_classes=num_classes,
        optimizer=optimizer,
        learning_rate=learning_rate,
        step_hook=step_hook,
        threads_per_worker=threads_per_worker,
        timeout=settings.dist_timeout,
        measure=timing_of(settings),
    )
    if kind_of_scaling == STRONG:
        spec = spec.split(batch_size)  # batch_size is the total: each device takes its share
    kinds = {parse_ctx_kind(c) for c in spec.worker_contexts}
    if len(kinds) != 1:
        raise ValueError(f"contexts mix device kinds: {', '.join(spec.worker_contexts)}")
    (kind,) = kinds
    gpus = spec.world_size * len(spec.worker_contexts) if spec.distributed else spec.world_size
    result = _case(bench, spec, kind, gpus, (model, name, batch_size))
    devices = [("cpu", 0)] if kind == "cpu" else [("gpu", i) for i in range(gpus)]
    # In a lock-step side of a paired run, the launch (set-up, warm-up and timing in its
    # ranks) is one timed turn: the other side's ranks never run beside these.
    return bench.through(result, devices, DataParallelStep(bench, block, spec), alone=True)


def _case(
    bench: CaseBench,
    spec: DataParallelSpec,
    kind: str,
    gpus: int,
    named: tuple[str | None, str | None, int],
) -> CaseResult:
    """The case, claimed: its key (``named``: the test's model, name and batch size), device
    and hardware."""
    model, name, batch_size = named
    n = spec.world_size
    label = f"{spec.kvstore}-{STRONG}" if spec.scaling == STRONG else spec.kvstore  # keys apart
    key = bench.key(
        model,
        "training",
        "float32",
        batch_size,
        kind,
        label if name is None else f"{label}-{name}",
        world_size=n,
    )
    bench.claim(key)
    first = spec.worker_contexts[0]
    device = f"{n}x {first}" if spec.distributed else f"{kind}({_indices(spec.contexts)})"
    return CaseResult(
        key=key,
        device=device,
        hardware=_hardware(bench, kind, gpus),
        threads=fingerprint.threads_in_force(os.environ),
        environment=fingerprint.perf_environment(os.environ),
        nodeid=bench.item.nodeid,
        worker=os.environ.get("PYTEST_XDIST_WORKER"),
    )


def _contexts(bench: CaseBench, contexts: Sequence[Any] | None, in_process: bool) -> list[str]:
    """The devices' names; a dist kvstore without contexts runs on the default device's kind."""
    from pytest_mxperf.distributed.train import context_name

    names = [context_name(c) for c in contexts or ()]
    if not names and not in_process:
        kind0, _ = bench.backend.describe(bench.default_ctx)
        names = ["gpu(0)" if kind0 == "gpu" else "cpu(0)"]
    return names


def _factory(net: Any, in_process: bool) -> tuple[Any, str]:
    """(the block itself when one process runs it, else None; the reference ranks load)."""
    from pytest_mxperf.distributed.train import object_ref
    from pytest_mxperf.measuring.dp_scaling import is_symbol_file

    if isinstance(net, str):
        if not is_symbol_file(net):
            check_factory(net)
        # An exported symbol file: ranks start in this directory, but name it absolutely.
        return None, str(Path(net).resolve()) if is_symbol_file(net) else net
    if not in_process:
        return None, object_ref(net)  # ranks import it: a module-level function
    # One process needs no import: a block, or what a factory function returns.
    block = net() if inspect.isfunction(net) else net
    return block, f"{type(block).__module__}:{type(block).__qualname__}"


def _hardware(bench: CaseBench, kind: str, gpus: int) -> str:
    run = bench.run
    if kind != "gpu":
        return run.hardware_for("cpu", 0)
    gpu_name = run.gpus[0]["name"] if run.gpus else None
    return fingerprint.hardware_key(
        "gpu", machine=run.machine, cpu=run.cpu_key, gpu_name=gpu_name, gpu_count=gpus
    )


def check_factory(ref: str) -> None:
    """Import a ``"module:callable"`` factory here, before any rank is launched: ranks import it
    with this process's ``sys.path``, so one that fails here would fail in every rank (each
    with its traceback, after the launch)."""
    from pytest_mxperf.distributed.train import load_object
    from pytest_mxperf.measuring.dp_scaling import DataParallelError

    problem = None
    try:
        obj = load_object(ref)
    except (DataParallelError, ValueError) as exc:
        problem = str(exc)
    except Exception as exc:  # the module itself raises on import
        problem = f"importing {ref!r} raised {type(exc).__name__}: {exc}"
    if problem is not None:  # failed outside the except block: no chained traceback
        pytest.fail(f"mxperf: data_parallel: {problem}", pytrace=False)
    if not callable(obj):
        pytest.fail(
            f"mxperf: data_parallel: {ref!r} is not callable (a {type(obj).__name__}): name a "
            "function that returns a fresh Gluon block",
            pytrace=False,
        )


@dataclass(frozen=True)
class DataParallelStep:
    """The measuring step of a data-parallel case (a `roles.Measure`): measured again while it
    looks regressed or its aggregate blocks spread too far to judge (up to
    ``--mxperf-confirm`` times); judged on the aggregate img/s and the scaling efficiency."""

    bench: CaseBench
    block: Any
    spec: DataParallelSpec

    def _judging(self, result: CaseResult, judging: Judging | None) -> _ScalingJudging:
        bench, n = self.bench, self.spec.world_size
        ref, expectations, _, policy = judging or (None, [], None, bench.policy(0.0))
        hardware, key = result.hardware, result.key
        floor = bench.marker.efficiency_floor(model=result.model, world_size=n, hardware=hardware)
        elsewhere = [] if judging is None else bench.run.baselines.elsewhere(hardware, key)
        return ref, expectations, floor, policy, elsewhere

    def __call__(self, result: CaseResult, judging: Judging | None, tries: Tries) -> CaseResult:
        """The case measured (the best attempt's figures, or how it failed)."""
        from pytest_mxperf.measuring.dp_scaling import DataParallelError

        bench, spec = self.bench, self.spec
        scaling_judging = self._judging(result, judging)
        # Each attempt is two launches; update mode stores the first (no best-of-N here).
        made: Attempts[Tried] = Attempts(1 if bench.settings.update else 1 + bench.settings.confirm)

        def attempt() -> Tried:
            measured = bench.backend.data_parallel(self.block, spec)
            return measured.aggregate_measurement(), measured.scaling()

        def again(_: Tried, last: Tried) -> bool:
            judged = judge_scaling(replace(result, **_last(made.tried)), *scaling_judging)
            return worth_another_attempt(judged.outcome, last[0])

        figures: dict[str, Any]
        try:
            # The most efficient steady attempt (of all, when none is: `runner.better_attempt`).
            made.run(attempt, better=lambda a, b: _rank(a) > _rank(b), again=again)
        except DataParallelError as exc:
            figures = {**_last(made.tried), "status": Status.ERROR, "error": str(exc)}
        except Exception as exc:
            oom = bench.backend.is_oom(exc)
            error = oom_message(exc) if oom else f"{type(exc).__name__}: {exc}"
            status = Status.OOM if oom else Status.ERROR
            figures = {**_last(made.tried), "status": status, "error": error}
        else:
            figures = _best(made, result.threads, spec.world_size)
        return replace(result, software=bench.backend.software(), **figures)

    def judge(self, measured: CaseResult, judging: Judging, tries: Tries) -> Judged:
        verdict = judge_scaling(measured, *self._judging(measured, judging))
        why_not = judging[2]
        if why_not is not None and verdict.outcome == Outcome.REGRESSED:
            note = f"not confirmed by a paired run ({why_not}): judged against the stored figure"
            verdict = verdict.adding(note)
        return Judged.of(verdict)


#: One data-parallel attempt: its aggregate measurement and its scaling.
Tried = tuple[Measurement, Scaling]
#: What a data-parallel case is judged with: baseline, expectations, efficiency floor, policy
#: and the hardware keys the case has a baseline for elsewhere.
_ScalingJudging = tuple[
    Optional[BaselineRef], list[Expectation], Optional[float], Policy, list[str]
]


def _rank(tried: Tried) -> tuple[bool, float]:
    return tried[0].steady, tried[1].efficiency


def _last(tried: list[Tried]) -> dict[str, Any]:
    """The last attempt's figures and every attempt's img/s (a record's fields, as it stands
    when an attempt is judged, or when one fails)."""
    if not tried:
        return {}
    return {
        "measurement": tried[-1][0],
        "scaling": tried[-1][1],
        "attempts": [m.items_per_sec for m, _ in tried],
    }


def _best(made: Attempts[Tried], threads: dict[str, Any], n: int) -> dict[str, Any]:
    """The figures of the best attempt (a record's fields): its aggregate measurement, its
    scaling, every attempt's img/s, and the threads of a rank where the ranks set their own."""
    if made.best is None:  # no attempt made
        return {}
    measurement, scaling = made.best
    if scaling.threads_per_worker is not None:
        per_rank = {"omp_threads": scaling.threads_per_worker, "source": f"per rank ({n} ranks)"}
        threads = {**threads, **per_rank}
    return {**_last(made.tried), "measurement": measurement, "scaling": scaling, "threads": threads}


def parse_ctx_kind(text: str) -> str:
    from pytest_mxperf.measuring.dp_scaling import parse_context

    return parse_context(text)[0]


def _indices(contexts: Sequence[str]) -> str:
    from pytest_mxperf.measuring.dp_scaling import parse_context

    return ",".join(str(parse_context(c)[1]) for c in contexts)
