"""Measure a data-parallel case on devices of this process; dist kvstores go to the launcher."""

from __future__ import annotations

import time
from typing import Any

from pytest_mxperf.distributed.train import (
    build_model,
    build_training_step,
    context_name,
    make_hook,
    measure_with_timeline,
    omp_threads,
    to_context,
)
from pytest_mxperf.measuring.dp_result import DataParallelResult
from pytest_mxperf.measuring.dp_scaling import DataParallelSpec, ScalingCase, WorkerReport
from pytest_mxperf.measuring.measure import measure

# in one process ---------------------------------------------------------------------------------


def measure_in_process(spec: DataParallelSpec, net: Any = None) -> WorkerReport:
    """Train on all of ``spec.contexts`` in this process and measure full and compute-only.

    ``net`` (a Gluon block) replaces ``spec.factory`` when given: one process needs no import.
    """
    from pytest_mxperf.system.mxnet_import import import_mxnet

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
        from pytest_mxperf.distributed.launch import run_distributed

        return run_distributed(spec)
    return run_in_process(spec)
