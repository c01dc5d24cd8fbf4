"""Records and arithmetic of data-parallel cases, without MXNet: exact numbers."""

from __future__ import annotations

import itertools
import json
import socket
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_mxperf.distributed.launch import tail
from pytest_mxperf.distributed.rank_env import default_threads, free_port, rank_environment
from pytest_mxperf.distributed.train import (
    block_spans,
    build_model,
    context_name,
    load_object,
    measure_with_timeline,
    object_ref,
)
from pytest_mxperf.measuring.dp_result import DataParallelResult
from pytest_mxperf.measuring.dp_scaling import (
    DataParallelError,
    DataParallelSpec,
    ScalingCase,
    WorkerReport,
    aggregate,
    comm_share,
    common_window,
    efficiency,
    items_in_window,
    parse_context,
)
from pytest_mxperf.measuring.measure import MeasureConfig, Measurement
from pytest_mxperf.measuring.records import Scaling

FAST = MeasureConfig(min_time=0.0, max_time=0.0, min_blocks=3, block_time=0.001)


def measurement(items: int, steps: int, blocks: tuple[float, ...]) -> Measurement:
    return Measurement(
        items_per_step=items,
        steps_per_block=steps,
        block_seconds=blocks,
        warmup_steps=1,
        warmup_seconds=0.0,
        warmup_steady=True,
        first_step_seconds=0.0,
        sync_seconds=0.0,
    )


def worker(
    rank: int, starts: list[float], seconds: float, items: int = 8, compute: float | None = None
) -> WorkerReport:
    """A worker whose blocks of ``items`` images last ``seconds`` each and start at ``starts``."""
    full = measurement(items, 1, tuple(seconds for _ in starts))
    comp = None if compute is None else measurement(items, 1, (compute,) * 3)
    return WorkerReport(
        rank=rank,
        contexts=("cpu(0)",),
        full=full,
        compute=comp,
        block_starts=tuple(starts),
        block_ends=tuple(s + seconds for s in starts),
    )


def test_wait_share_splits_the_exchange_into_waiting_for_the_slowest_and_push_pull() -> None:
    from pytest_mxperf.judging.explain_scaling import step_split
    from pytest_mxperf.measuring.dp_scaling import ScalingCase, wait_share

    # Both take 1.0 s a step; alone, worker 0 computes in 0.4 s, worker 1 (the slowest) in 0.7 s.
    fast = worker(0, [0.0, 1.0, 2.0], 1.0, compute=0.4)
    slow = worker(1, [0.0, 1.0, 2.0], 1.0, compute=0.7)
    # Worker 0 waits 0.3 s of its 0.6 s exchange for worker 1; worker 1 waits for nobody.
    assert wait_share([fast, slow]) == pytest.approx((0.3 + 0.0) / 2)
    case = ScalingCase(2, 16.0, 3.0, (fast, slow), 10.0)
    assert case.comm_share == pytest.approx((0.6 + 0.3) / 2)
    assert case.wait_share == pytest.approx(0.15)
    # Never more than the exchange: a worker whose full step is barely above its own compute.
    quick = worker(0, [0.0, 1.0, 2.0], 0.5, compute=0.45)
    assert wait_share([quick, slow]) == pytest.approx((0.05 / 0.5 + 0.0) / 2)
    # One worker, or no compute-only figures: no one to wait for.
    assert wait_share([slow]) == 0.0
    assert wait_share([worker(0, [0.0], 1.0), worker(1, [0.0], 1.0)]) == 0.0
    s = Scaling(
        kvstore="dist_sync",
        world_size=2,
        single_images_per_sec=10.0,
        per_worker_images_per_sec=(8.0, 8.0),
        efficiency=0.8,
        comm_share=0.45,
        wait_share=0.15,
    )
    assert step_split(s) == (
        "a step of a worker: compute 55%, kvstore push/pull 30%, waiting for the slowest worker 15%"
    )
    assert step_split(replace(s, kvstore="device")) is None


def test_efficiency_is_aggregate_over_n_times_single() -> None:
    assert efficiency(100.0, 180.0, 2) == 0.9
    assert efficiency(100.0, 100.0, 1) == 1.0
    with pytest.raises(ValueError, match="img/s"):
        efficiency(0.0, 10.0, 2)
    with pytest.raises(ValueError, match="workers"):
        efficiency(1.0, 10.0, 0)


def test_comm_share_from_full_and_compute_rates() -> None:
    assert comm_share(75.0, 100.0) == 0.25
    # Noise can make the full step look faster: that is not negative communication.
    assert comm_share(110.0, 100.0) == 0.0


def test_common_window_and_pro_rata_blocks() -> None:
    a = worker(0, [0.0, 1.0, 2.0, 3.0], 1.0)  # 8 images per second over 0-4
    b = worker(1, [1.5, 2.5, 3.5], 1.0)  # 8 images per second over 1.5-4.5
    assert common_window([a, b]) == (1.5, 4.0)
    assert items_in_window(a, 1.5, 4.0) == 8 * 2.5
    assert items_in_window(b, 1.5, 4.0) == 8 * 2.5
    case = aggregate([b, a], wall_seconds=9.0)
    assert case.images_per_sec == 16.0
    assert case.window_seconds == 2.5
    assert [w.rank for w in case.workers] == [0, 1]
    assert case.per_worker_images_per_sec == (8.0, 8.0)
    assert case.wall_seconds == 9.0


def test_a_slow_worker_counts_only_what_it_did_in_the_window() -> None:
    fast = worker(0, [0.0, 1.0, 2.0, 3.0], 1.0, items=10)
    slow = worker(1, [0.0, 2.0], 2.0, items=10)  # 5 images/s
    case = aggregate([fast, slow])
    assert case.images_per_sec == 15.0


def test_workers_that_never_overlap_are_an_error() -> None:
    with pytest.raises(DataParallelError, match="never overlapped"):
        common_window([worker(0, [0.0], 1.0), worker(1, [2.0], 1.0)])


def test_result_derives_figures_from_the_two_cases() -> None:
    spec = DataParallelSpec(factory="m:f", batch_per_device=8, workers=2)
    single = ScalingCase(1, 100.0, 1.0, (worker(0, [0.0], 0.08, compute=0.06),), 3.0)
    pair = (worker(0, [0.0], 0.1, compute=0.05), worker(1, [0.0], 0.1, compute=0.05))
    scaled = ScalingCase(2, 160.0, 1.0, pair, 4.0)
    result = DataParallelResult(spec, single, scaled)
    assert result.efficiency == 0.8
    assert result.comm_share == 0.5
    assert single.comm_share == pytest.approx(0.25)
    assert result.world_size == 2
    assert result.kvstore == "dist_sync"
    data = json.loads(json.dumps(result.as_dict()))
    assert data["efficiency"] == 0.8
    assert data["scaled"]["workers"][1]["rank"] == 1


def test_worker_report_round_trips_through_json() -> None:
    report = worker(3, [1.0, 2.0], 0.5, compute=0.25)
    back = WorkerReport.from_dict(json.loads(json.dumps(report.as_dict())))
    assert back == report
    assert back.comm_share == 0.5


def test_spec_validates_and_round_trips() -> None:
    spec = DataParallelSpec(
        factory="pkg.mod:make", batch_per_device=4, kvstore="local", contexts=("cpu(0)", "cpu(1)")
    )
    assert not spec.distributed and spec.world_size == 2 and not spec.lockstep
    assert spec.with_world(1).contexts == ("cpu(0)",)
    assert DataParallelSpec.from_dict(json.loads(json.dumps(spec.as_dict()))) == spec
    dist = DataParallelSpec(factory="pkg.mod:make", batch_per_device=4, workers=3)
    assert dist.lockstep and dist.world_size == 3 and dist.with_world(1).workers == 1
    assert not DataParallelSpec(factory="m:f", batch_per_device=1, kvstore="dist_async").lockstep
    with pytest.raises(ValueError, match="unknown kvstore"):
        DataParallelSpec(factory="m:f", batch_per_device=1, kvstore="horovod")
    with pytest.raises(ValueError, match=r"package\.module:function"):
        DataParallelSpec(factory="m.f", batch_per_device=1)
    with pytest.raises(ValueError, match="contexts"):
        DataParallelSpec(factory="m:f", batch_per_device=1, kvstore="device")
    with pytest.raises(ValueError, match="not a device"):
        DataParallelSpec(factory="m:f", batch_per_device=1, kvstore="local", contexts=("tpu0",))
    symbol = DataParallelSpec(factory="models/mlp-symbol.json", batch_per_device=1)
    assert DataParallelSpec.from_dict(json.loads(json.dumps(symbol.as_dict()))) == symbol


def test_a_missing_symbol_file_is_named(tmp_path: Path) -> None:
    path = str(tmp_path / "gone-symbol.json")
    with pytest.raises(
        DataParallelError, match=r"symbol file .*gone-symbol\.json.* does not exist"
    ):
        build_model(DataParallelSpec(factory=path, batch_per_device=1))


def test_contexts_parse_and_print() -> None:
    assert parse_context("gpu(1)") == ("gpu", 1)
    assert parse_context("cpu:0") == ("cpu", 0)
    assert context_name("gpu:2") == "gpu(2)"


def test_factories_are_referenced_by_import_path() -> None:
    assert load_object("json:dumps") is json.dumps
    assert object_ref(json.dumps) == "json:dumps"
    with pytest.raises(DataParallelError, match="cannot be imported by a worker"):
        object_ref(lambda: None)
    with pytest.raises(DataParallelError, match="no attribute"):
        load_object("json:nope")
    with pytest.raises(DataParallelError, match="cannot import"):
        load_object("no_such_module_here:f")


def test_block_spans_found_among_clock_readings() -> None:
    readings = [0.0, 0.5, 0.75, 1.0, 1.25, 2.0, 2.5, 2.5, 3.0]
    assert block_spans(readings, [0.5, 0.5]) == ((2.0, 2.5), (2.5, 3.0))
    with pytest.raises(DataParallelError):
        block_spans([0.0, 1.0], [0.25])


def test_measure_with_timeline_spans_match_the_blocks() -> None:
    counter = itertools.count()
    result, starts, ends = measure_with_timeline(
        lambda: next(counter), items_per_step=2, sync=lambda: None, config=FAST
    )
    assert len(starts) == len(ends) == len(result.block_seconds)
    assert tuple(e - s for s, e in zip(starts, ends)) == result.block_seconds
    assert all(b >= a for a, b in zip(ends, starts[1:]))


def test_rank_environment_pins_loopback_and_threads() -> None:
    base = {"DMLC_ROLE": "stale", "PS_VERBOSE": "2", "HOME": "/h", "PYTHONPATH": ""}
    env = rank_environment(
        base, role="worker", index=1, port=9100, workers=2, servers=1, threads=1, run_id="x"
    )
    assert env["DMLC_ROLE"] == "worker"
    assert env["DMLC_PS_ROOT_URI"] == env["DMLC_NODE_HOST"] == "127.0.0.1"
    assert env["DMLC_PS_ROOT_PORT"] == "9100"
    assert (env["DMLC_NUM_WORKER"], env["DMLC_NUM_SERVER"]) == ("2", "1")
    assert env["OMP_NUM_THREADS"] == "1"
    assert env["PYTEST_MXPERF_RUN_ID"] == "x"
    assert env["PYTEST_MXPERF_LOCAL_RANK"] == "1"
    assert "PS_VERBOSE" not in env and env["HOME"] == "/h"
    server = rank_environment(
        base, role="server", index=0, port=9100, workers=2, servers=1, threads=4, run_id="x"
    )
    assert server["OMP_NUM_THREADS"] == "1"


def test_threads_split_the_cores_between_workers() -> None:
    assert default_threads(2, cpus=2) == 1
    assert default_threads(1, cpus=2) == 2
    assert default_threads(4, cpus=2) == 1


def test_free_port_is_bindable_and_tail_reads_the_end(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    log = tmp_path / "rank.log"
    log.write_text("\n".join(f"line {i}" for i in range(100)))
    assert tail(log, 2) == "line 98\nline 99"


def test_a_rank_that_fails_fails_the_call_without_a_relaunch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # "init K first" was taken for an MXNet start-up race and relaunched; it was the ranks'
    # own doing (conv weights in oneDNN's layout, `train.default_layouts`), now fixed: any
    # abort is the case's error at once, with its rank's output.
    from pytest_mxperf.distributed import launch as launcher

    tail_text = (
        "what():  kvstore_dist_server.h:611: Check failed: !stored.is_none(): init 108 first"
    )
    rank = launcher.RankProcess("server", 0, 4242, tmp_path / "server-0.log")
    calls: list[int] = []

    def fake_launch(spec: DataParallelSpec, **kw: object) -> list[WorkerReport]:
        calls.append(spec.workers)
        raise launcher.RankFailed("server 0 was killed by SIGABRT", rank, -6, tail_text)

    monkeypatch.setattr(launcher, "launch", fake_launch)
    spec = DataParallelSpec(factory="m:f", batch_per_device=8, kvstore="dist_sync", workers=2)
    with pytest.raises(launcher.RankFailed, match="SIGABRT") as info:
        launcher.run_distributed(spec)
    assert calls == [1]
    assert "init 108 first" in info.value.tail


class _Scalar:
    """The part of an NDArray `rank.Lockstep` uses: a one-element float array."""

    def __init__(self) -> None:
        self.value = 0.0

    def __setitem__(self, _: slice, value: float) -> None:
        self.value = value

    def asscalar(self) -> float:
        return self.value


class _SyncKV:
    """A ``dist_sync`` kvstore for threads: a push of a key waits for every worker's push of
    that key in that round, and each gets the round's sum."""

    def __init__(self, workers: int) -> None:
        self.num_workers = workers
        self._lock = threading.Condition()
        self._rounds: dict[tuple[int, int], list[float]] = {}
        self._count: dict[tuple[int, int], int] = {}

    def init(self, key: int, value: _Scalar) -> None:
        pass

    def pushpull(self, key: int, value: _Scalar, out: _Scalar) -> None:
        with self._lock:
            rnd = self._count.get((threading.get_ident(), key), 0)
            self._count[(threading.get_ident(), key)] = rnd + 1
            values = self._rounds.setdefault((key, rnd), [])
            values.append(value.value)
            assert self._lock.wait_for(lambda: len(values) == self.num_workers, timeout=30)
            self._lock.notify_all()
            out.value = sum(values)


def test_sync_workers_start_their_blocks_and_stop_at_the_same_step() -> None:
    # Worker 0 is warm after 5 steps, worker 1 after 60: the first waits, stepping, so their
    # timed blocks begin together; then they need 10 and 30 steps, and stop together.
    from types import SimpleNamespace

    from pytest_mxperf.distributed.rank import Lockstep

    kv = _SyncKV(2)
    mx = SimpleNamespace(nd=SimpleNamespace(zeros=lambda shape, ctx: _Scalar()))
    seen: dict[int, tuple[int, bool, int, int]] = {}

    def worker(rank: int, warm_after: int, blocks: int) -> None:
        grads = (_Scalar(), _Scalar())
        lock = Lockstep(mx, kv, 100, None, every=4)

        def step() -> None:
            kv.pushpull(0, grads[0], out=grads[1])  # the gradient exchange couples the steps
            lock.after_step()

        lock.bind(step)
        for _ in range(warm_after):
            step()
        ready = lock.ready()
        start = lock.steps
        for _ in range(blocks):
            step()
        extra = lock.finish()
        seen[rank] = (start, ready, lock.steps, extra)

    threads = [threading.Thread(target=worker, args=args) for args in ((0, 5, 10), (1, 60, 30))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    (start0, ready0, end0, extra0), (start1, ready1, end1, extra1) = seen[0], seen[1]
    assert start0 == start1 >= 60 and not ready0 and not ready1
    assert end0 == end1 >= start1 + 30
    assert extra0 > extra1  # the faster one kept stepping until the other was done
