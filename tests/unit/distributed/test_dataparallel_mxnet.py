"""Data-parallel cases with real MXNet: kvstore processes on 127.0.0.1 (dist_sync and
dist_async, one and two servers), a rank that dies or hangs, Ctrl-C.

A 2-layer MLP and short measuring times keep each launch to a few seconds. The assertions
are about behaviour (figures exist and add up, processes and ports are released, failures
name the rank), never about how fast anything ran; the injected-exchange test compares two
runs whose difference is built in."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import pytest
from dp_ranks import SHORT, SPEC, TINY, Watch

from pytest_mxperf.distributed.launch import (
    LaunchTimeout,
    RankFailed,
    RankProcess,
    launch,
    run_distributed,
)
from pytest_mxperf.distributed.rank_env import default_threads
from pytest_mxperf.measuring.dp_result import DataParallelResult

pytest.importorskip("mxnet")

import mxperf_dp_models as models


@dataclass(frozen=True)
class Run:
    result: DataParallelResult
    watch: Watch


#: The dist_sync launches whose figures are checked and compared: `TINY` (see there).
MEASURED = replace(SPEC, measure=TINY)


@pytest.fixture(scope="module")
def dist_run() -> Iterator[Run]:
    watch = Watch()
    result = run_distributed(MEASURED, run_id=watch.run_id, on_poll=watch)
    yield Run(result, watch)


@pytest.fixture
def no_test_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (models.INJECT_ENV, models.DIE_ENV, models.HANG_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# distributed --------------------------------------------------------------------------------


def test_dist_sync_one_and_two_workers(dist_run: Run) -> None:
    result = dist_run.result
    assert (result.kvstore, result.world_size) == ("dist_sync", 2)
    assert result.single.world_size == 1 and len(result.single.workers) == 1
    assert len(result.per_worker_images_per_sec) == 2
    assert all(rate > 0 for rate in result.per_worker_images_per_sec)
    assert result.images_per_sec > 0 and result.single.images_per_sec > 0
    assert result.efficiency == result.images_per_sec / (2 * result.single.images_per_sec)
    assert 0 <= result.comm_share <= 1 and 0 <= result.single.comm_share <= 1
    assert result.scaled.window_seconds > 0
    workers = result.scaled.workers
    assert [w.rank for w in workers] == [0, 1]
    assert len({w.pid for w in workers}) == 2
    # Every worker measured the full and the compute-only step, summing on the servers.
    assert all(w.compute is not None and w.update_on_kvstore is False for w in workers)
    # N ranks share the cores: the same OMP threads per worker at 1 and at N, recorded.
    threads = default_threads(2)
    assert result.threads_per_worker == threads
    assert {w.threads for w in (*workers, *result.single.workers)} == {threads}


def test_dist_ranks_listen_on_loopback_only_and_leave_nothing(dist_run: Run) -> None:
    watch = dist_run.watch
    assert set(watch.roles.values()) == {"scheduler", "server", "worker"}
    assert watch.listening, "no listening socket of a rank was seen"
    assert {addr for addr, _ in watch.listening} == {"127.0.0.1"}
    assert watch.ports <= {port for _, port in watch.listening}
    watch.assert_all_gone()


def test_a_worker_that_dies_fails_the_run_with_its_output(no_test_env: pytest.MonkeyPatch) -> None:
    no_test_env.setenv(models.DIE_ENV, "1:30")
    watch = Watch()
    with pytest.raises(RankFailed) as info:
        launch(SPEC, run_id=watch.run_id, on_poll=watch)
    assert info.value.rank.role == "worker"
    assert info.value.returncode == -9
    assert "SIGKILL" in str(info.value)
    assert "this worker kills itself" in info.value.tail
    watch.assert_all_gone()
    # Only that run failed: the next one on this machine works.
    no_test_env.delenv(models.DIE_ENV)
    after = Watch()
    reports = launch(replace(SPEC, workers=1, measure=TINY), run_id=after.run_id, on_poll=after)
    assert len(reports) == 1
    after.assert_all_gone()


def test_timeout_ends_every_rank(no_test_env: pytest.MonkeyPatch) -> None:
    no_test_env.setenv(models.HANG_ENV, "0:1")  # the run can never finish
    watch = Watch()
    with pytest.raises(LaunchTimeout, match=r"did not finish within 1\.5 s"):
        launch(replace(SPEC, timeout=1.5), run_id=watch.run_id, on_poll=watch)
    watch.assert_all_gone()


def test_ctrl_c_ends_every_rank(no_test_env: pytest.MonkeyPatch) -> None:
    watch = Watch()

    def interrupt(ranks: Sequence[RankProcess]) -> None:
        watch(ranks)
        if watch.polls == 20:  # about a second in: the ranks are starting up or training
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        launch(SPEC, run_id=watch.run_id, on_poll=interrupt)
    watch.assert_all_gone()


def test_injected_exchange_lowers_efficiency_and_raises_comm_share(
    dist_run: Run, no_test_env: pytest.MonkeyPatch
) -> None:
    # 2M floats (8 MB) per worker and step, through the one server: far more than the
    # MLP's 200k parameters, so the exchange dominates the step by construction.
    no_test_env.setenv(models.INJECT_ENV, str(2_000_000))
    watch = Watch()
    slow = run_distributed(MEASURED, run_id=watch.run_id, on_poll=watch)
    base = dist_run.result
    assert slow.comm_share > base.comm_share
    assert slow.single.comm_share > base.single.comm_share
    if slow.efficiency >= base.efficiency:
        # The module's plain run was launched minutes earlier, under another load (beside the
        # other xdist worker its efficiency measured 0.35, the injected run's 0.42 once): the
        # plain run again, now, beside the same load as the injected one.
        no_test_env.delenv(models.INJECT_ENV)
        base = run_distributed(MEASURED, run_id=watch.run_id, on_poll=watch)
    assert slow.efficiency < base.efficiency
    watch.assert_all_gone()


def test_dist_async_one_and_two_workers(no_test_env: pytest.MonkeyPatch) -> None:
    # No lock-step (async workers never wait for each other's push): the optimizer runs on the
    # server, each worker stops when its own measurement is done. So `SHORT`, not `TINY`: with
    # TINY's 0.1 s window, a rank that a loaded machine (this suite under -n 2) started 0.1 s
    # late timed after the other had finished, and the run was refused for windows that never
    # overlapped (seen once, 2026-11-26).
    watch = Watch()
    spec = replace(SPEC, kvstore="dist_async", measure=SHORT)
    result = run_distributed(spec, run_id=watch.run_id, on_poll=watch)
    assert (result.kvstore, result.world_size) == ("dist_async", 2)
    workers = result.scaled.workers
    assert [w.rank for w in workers] == [0, 1]
    assert all(w.update_on_kvstore is True and w.compute is not None for w in workers)
    assert all(rate > 0 for rate in result.per_worker_images_per_sec)
    assert result.efficiency == result.images_per_sec / (2 * result.single.images_per_sec)
    watch.assert_all_gone()


def test_dist_sync_trains_biased_convolutions_with_one_and_two_servers(
    no_test_env: pytest.MonkeyPatch,
) -> None:
    # Every launch of this net aborted before (kv_app.h:624 or "init K first"): an inference
    # forward had left its conv weights in oneDNN's layout, which a dist kvstore cannot send.
    # The two workers' launch with one server, then with two (the keys split between them).
    # img/s(1)'s launch, the same code with one worker, is left out (about 3 s here): how the
    # plugin pairs the two launches is test_dist_sync_one_and_two_workers' subject.
    spec = replace(SPEC, factory="mxperf_dp_models:biased_convnet", step_hook=None, measure=TINY)
    for servers in (1, 2):
        watch = Watch()
        reports = launch(replace(spec, servers=servers), run_id=watch.run_id, on_poll=watch)
        assert [r.rank for r in reports] == [0, 1]
        assert all(r.images_per_sec > 0 for r in reports)
        assert list(watch.roles.values()).count("server") == servers
        watch.assert_all_gone()
