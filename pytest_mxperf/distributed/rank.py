"""One rank of a distributed data-parallel case: ``python -m pytest_mxperf.distributed.rank``.

The role comes from ``DMLC_ROLE`` as MXNet's launcher sets it. A scheduler, and a server of a
sync case, run ps-lite's node on MXNet's C library alone (`pytest_mxperf.distributed.node`); a
server that applies the optimizer imports mxnet, which runs the node and exits the process.
A worker builds the model from the spec's factory, creates the kvstore, trains on synthetic
device-resident data with one Gluon ``Trainer``, times blocks with
:func:`pytest_mxperf.measuring.measure.measure`, then times the same step without exchange,
and writes a :class:`~pytest_mxperf.measuring.dp_scaling.WorkerReport` as JSON to ``--out``.

Usage: ``python -m pytest_mxperf.distributed.rank --spec SPEC.json --out REPORT.json``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from pytest_mxperf.distributed.node import run_node
from pytest_mxperf.distributed.train import (
    build_model,
    build_training_step,
    context_name,
    make_hook,
    measure_with_timeline,
    omp_threads,
)
from pytest_mxperf.measuring.dp_scaling import DataParallelSpec, WorkerReport, parse_context
from pytest_mxperf.measuring.measure import measure
from pytest_mxperf.system import files

#: Set by `launch`: the index of this worker on its host (GPU devices shift by it).
LOCAL_RANK_ENV = "PYTEST_MXPERF_LOCAL_RANK"


class Lockstep:
    """Lets the workers of a sync kvstore start their timed blocks at the same step and stop
    after the same step.

    Under ``dist_sync`` a worker's push waits for every other worker's push of that round, so
    a worker that stops while another still steps leaves it waiting forever. The engine decides
    on its own when a worker's warm-up and measurement are done, so the workers agree through
    the kvstore: every ``every`` steps each pushes 1 (done) or 0 on a key of its own and all
    read the sum of the previous round, which is the same number on every worker. They stop
    when it reaches the number of workers. Reading the previous round, not the current, keeps
    the read from stalling the pipeline. The kvstore must sum plainly (``update_on_kvstore=
    False``): an optimizer on the servers would rewrite the flag.

    The start is agreed the same way on the next key (warm or not): a worker whose warm-up is
    done keeps stepping in `ready` until every worker's is, so their timed blocks begin
    together (a worker left warming up while another timed all its blocks gave windows that
    never overlapped).
    """

    #: Each worker warms up on its own device (`measure.Interleave`).
    shared_warmup = False

    def __init__(self, mx: Any, kv: Any, key: int, ctx: Any, every: int = 8) -> None:
        self.every = every
        self._stop = _Agreement(mx, kv, key, ctx)
        self._start = _Agreement(mx, kv, key + 1, ctx)
        self.warm = False
        self.all_warm = False
        self.done = False
        self.stopped = False
        self.steps = 0
        self._step: Callable[[], object] | None = None

    def after_step(self) -> None:
        """Run after every training step."""
        self.steps += 1
        if self.stopped or self.steps % self.every:
            return
        if not self.all_warm:
            self.all_warm = self._start.agreed(self.warm)
        self.stopped = self._stop.agreed(self.done)

    def bind(self, step: Callable[[], object]) -> None:
        """The training step `ready` and `finish` take while waiting for the others."""
        self._step = step

    def _step_until(self, agreed: Callable[[], bool]) -> int:
        assert self._step is not None, "bind the step first"
        steps = 0
        while not agreed():
            self._step()
            steps += 1
        return steps

    def ready(self) -> bool:
        """`measure.Interleave`: this worker is warm; step until every worker is, then time
        blocks as usual (False: not in turns with another process)."""
        self.warm = True
        self._step_until(lambda: self.all_warm)
        return False

    def next(self, rate: float) -> bool:
        return False

    def finish(self) -> int:
        """Mark this worker done and keep stepping until all are; returns the extra steps."""
        self.done = True
        return self._step_until(lambda: self.stopped)


class _Agreement:
    """One yes or no the workers of a sync kvstore agree on (`Lockstep`): each pushes its own
    on ``key`` and reads the sum of the round before, the same number on every worker."""

    def __init__(self, mx: Any, kv: Any, key: int, ctx: Any) -> None:
        self.kv = kv
        self.key = key
        self.workers = int(kv.num_workers)
        self.flag = mx.nd.zeros((1,), ctx=ctx)
        self.total = mx.nd.zeros((1,), ctx=ctx)
        kv.init(key, self.flag)
        self._pending = False

    def agreed(self, mine: bool) -> bool:
        """Every worker said yes in the round read now; else say ``mine`` for the next one."""
        if self._pending and int(self.total.asscalar()) >= self.workers:
            return True
        self.flag[:] = 1.0 if mine else 0.0
        self.kv.pushpull(self.key, self.flag, out=self.total)
        self._pending = True
        return False


class Barrier:
    """`measure.Interleave` for async kvstores, whose workers never wait for each other's
    push: a kvstore barrier once warm, so every worker's timed blocks begin together."""

    #: Each worker warms up on its own device (`measure.Interleave`).
    shared_warmup = False

    def __init__(self, kv: Any) -> None:
        self.kv = kv

    def ready(self) -> bool:
        self.kv._barrier()
        return False

    def next(self, rate: float) -> bool:
        return False


def _chain(*hooks: Callable[[], object] | None) -> Callable[[], object] | None:
    active = [h for h in hooks if h is not None]
    if not active:
        return None

    def run() -> None:
        for hook in active:
            hook()

    return run


def worker_contexts(mx: Any, spec: DataParallelSpec, local_rank: int) -> list[Any]:
    """This worker's devices: GPUs of the workers of one host do not overlap."""
    contexts = []
    for text in spec.worker_contexts:
        kind, index = parse_context(text)
        if kind == "gpu":
            contexts.append(mx.gpu(index + local_rank * len(spec.worker_contexts)))
        else:
            contexts.append(mx.cpu(index))
    return contexts


def servers_update(spec: DataParallelSpec) -> bool:
    """Whether the workers hand the optimizer to the servers (``update_on_kvstore``). Async
    kvstores need it there; sync ones sum plainly so that the `Lockstep` flag survives (the
    exchange volume is the same: gradients up, arrays down), and their servers need no MXNet
    Python side (`pytest_mxperf.distributed.node`)."""
    return not spec.lockstep


def run_worker(spec: DataParallelSpec) -> WorkerReport:
    """Measure this worker's full and compute-only training step."""
    from pytest_mxperf.system.mxnet_import import import_mxnet

    mx = import_mxnet()
    kv = mx.kv.create(spec.kvstore)
    contexts = worker_contexts(mx, spec, int(os.environ.get(LOCAL_RANK_ENV, "0")))
    net = build_model(spec)
    update_on_kvstore = servers_update(spec)
    lockstep = None
    if spec.lockstep:
        # Trainer keys its parameters 0..P-1: P and P + 1 are free.
        lockstep = Lockstep(mx, kv, len(list(net.collect_params().keys())), contexts[0])
    hook = _chain(make_hook(spec, kv, contexts), lockstep.after_step if lockstep else None)
    full = build_training_step(
        mx, net, contexts, spec, kv=kv, update_on_kvstore=update_on_kvstore, hook=hook
    )
    together: Lockstep | Barrier | None = None
    if lockstep is not None:
        lockstep.bind(full.step)
        together = lockstep
    elif spec.distributed:
        together = Barrier(kv)
    result, starts, ends = measure_with_timeline(
        full.step,
        items_per_step=full.items_per_step,
        sync=mx.nd.waitall,
        config=replace(spec.measure, interleave=together),
    )
    if lockstep is not None:
        lockstep.finish()
    mx.nd.waitall()
    local = build_training_step(mx, net, contexts, spec, kv=None)
    compute = measure(
        local.step, items_per_step=local.items_per_step, sync=mx.nd.waitall, config=spec.measure
    )
    return WorkerReport(
        rank=int(kv.rank),
        contexts=tuple(context_name(c) for c in contexts),
        full=result,
        compute=compute,
        block_starts=starts,
        block_ends=ends,
        threads=omp_threads(),
        update_on_kvstore=update_on_kvstore,
        pid=os.getpid(),
    )


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically: the launcher never reads half a report."""
    files.write_json_atomic(path, data, indent=1, allow_nan=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of every rank; returns the exit status."""
    role = os.environ.get("DMLC_ROLE", "worker")
    parser = argparse.ArgumentParser(prog="python -m pytest_mxperf.distributed.rank")
    parser.add_argument("--spec", type=Path, required=True, help="DataParallelSpec as JSON")
    parser.add_argument(
        "--out", type=Path, required=True, help="where to write the report ({rank} expands)"
    )
    args = parser.parse_args(argv)
    spec = DataParallelSpec.from_dict(json.loads(args.spec.read_text()))
    if role == "scheduler" or (role == "server" and not servers_update(spec)):
        run_node()  # this node until the job ends, on MXNet's C library alone
        return 0
    if role == "server":
        from pytest_mxperf.system.mxnet_import import import_mxnet

        import_mxnet()  # runs this node until the job ends, then exits the process
        return 0
    report = run_worker(spec)
    # "{rank}" in the path keeps the workers of a cluster run apart on a shared file system.
    write_json(Path(str(args.out).replace("{rank}", str(report.rank))), report.as_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
