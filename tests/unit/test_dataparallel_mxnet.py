"""Data-parallel cases with real MXNet: kvstore processes on 127.0.0.1 and several CPU devices.

A 2-layer MLP and short measuring times keep each launch to a few seconds. The assertions
are about behaviour (figures exist and add up, processes and ports are released, failures
name the rank), never about how fast anything ran; the injected-exchange test compares two
runs whose difference is built in.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_mxperf.distributed.launch import (
    LaunchTimeout,
    RankFailed,
    RankProcess,
    launch,
    run_distributed,
)
from pytest_mxperf.distributed.local import run_in_process
from pytest_mxperf.distributed.rank_env import RUN_ID_ENV, default_threads
from pytest_mxperf.measuring.dataparallel import DataParallelSpec
from pytest_mxperf.measuring.dp_result import DataParallelResult
from pytest_mxperf.measuring.measure import MeasureConfig

mx = pytest.importorskip("mxnet")

import mxperf_dp_models as models  # noqa: E402  (beside this file; ranks import it too)

SHORT = MeasureConfig(
    min_time=0.4,
    max_time=1.0,
    warmup_time=1.0,
    warmup_min_time=0.2,
    block_time=0.1,
    min_blocks=5,
    max_blocks=20,
)
SPEC = DataParallelSpec(
    factory="mxperf_dp_models:dense_net",
    batch_per_device=16,
    input_shape=(3, 32, 32),
    kvstore="dist_sync",
    workers=2,
    servers=1,
    step_hook="mxperf_dp_models:hooks",
    timeout=180.0,
    measure=SHORT,
)


# /proc inspection ---------------------------------------------------------------------------


def pids_with_env(name: str, value: str) -> list[int]:
    """Live processes (of this user) whose environment holds ``name=value``."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        if needle in env:
            found.append(int(entry.name))
    return found


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode(errors="replace").partition("=") for item in raw if item)
    return {k: v for k, _, v in pairs}


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """TCP sockets the process listens on, as (address, port)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, v6 in (("tcp", False), ("tcp6", True)):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                addr, port = cols[1].split(":")
                found.add((_address(addr, v6), int(port, 16)))
    return found


def listening_ports() -> set[int]:
    """Every TCP port of this network namespace with a socket in LISTEN."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A":
                    ports.add(int(cols[1].split(":")[1], 16))
    return ports


def _address(hexaddr: str, v6: bool) -> str:
    if v6:
        return "v6:" + hexaddr
    return ".".join(str(int(hexaddr[i : i + 2], 16)) for i in (6, 4, 2, 0))


@dataclass
class Watch:
    """What the launcher's on_poll saw of the running ranks."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pids: set[int] = field(default_factory=set)
    roles: dict[int, str] = field(default_factory=dict)
    listening: set[tuple[str, int]] = field(default_factory=set)
    ports: set[int] = field(default_factory=set)
    polls: int = 0

    def __call__(self, ranks: Sequence[RankProcess]) -> None:
        self.polls += 1
        for rank in ranks:
            self.pids.add(rank.pid)
            self.roles[rank.pid] = rank.role
            try:
                self.ports.add(int(environ_of(rank.pid)["DMLC_PS_ROOT_PORT"]))
                self.listening |= listening_addresses(rank.pid)
            except (OSError, KeyError):
                pass  # the rank just exited

    def assert_all_gone(self) -> None:
        assert self.pids, "the launcher never reported its ranks"
        assert pids_with_env(RUN_ID_ENV, self.run_id) == []
        for pid in self.pids:
            assert not Path(f"/proc/{pid}").exists(), f"{self.roles[pid]} pid {pid} is left"
        assert self.ports, "no scheduler port was seen"
        for port in self.ports:
            assert port not in listening_ports(), f"port {port} is still listened on"
            with socket.socket() as sock:
                # Closed connections linger in TIME_WAIT (kernel state, no process): as any
                # server would, reuse the address; a listener left behind still fails this.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", port))
                sock.listen()


@dataclass(frozen=True)
class Run:
    result: DataParallelResult
    watch: Watch


@pytest.fixture(scope="module")
def dist_run() -> Iterator[Run]:
    watch = Watch()
    result = run_distributed(SPEC, run_id=watch.run_id, on_poll=watch)
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
    reports = launch(replace(SPEC, workers=1), run_id=after.run_id, on_poll=after)
    assert len(reports) == 1
    after.assert_all_gone()


def test_timeout_ends_every_rank(no_test_env: pytest.MonkeyPatch) -> None:
    no_test_env.setenv(models.HANG_ENV, "0:1")  # the run can never finish
    watch = Watch()
    with pytest.raises(LaunchTimeout, match="did not finish within 3 s"):
        launch(replace(SPEC, timeout=3.0), run_id=watch.run_id, on_poll=watch)
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
    slow = run_distributed(SPEC, run_id=watch.run_id, on_poll=watch)
    base = dist_run.result
    assert slow.comm_share > base.comm_share
    assert slow.single.comm_share > base.single.comm_share
    assert slow.efficiency < base.efficiency
    watch.assert_all_gone()


def test_dist_async_one_and_two_workers(no_test_env: pytest.MonkeyPatch) -> None:
    # No lock-step (async workers never wait for each other's push): the optimizer runs on the
    # server, each worker stops when its own measurement is done.
    watch = Watch()
    result = run_distributed(
        replace(SPEC, kvstore="dist_async"), run_id=watch.run_id, on_poll=watch
    )
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
    for servers in (1, 2):
        watch = Watch()
        spec = replace(SPEC, factory="mxperf_dp_models:biased_convnet", step_hook=None)
        result = run_distributed(replace(spec, servers=servers), run_id=watch.run_id, on_poll=watch)
        assert result.world_size == 2
        assert all(rate > 0 for rate in result.per_worker_images_per_sec)
        assert result.single.images_per_sec > 0
        watch.assert_all_gone()


# MXNet's own launcher ----------------------------------------------------------------------

KV_SUM_JOB = """
import os
import mxnet as mx  # a scheduler or server runs its ps-lite node in this import and exits

kv = mx.kv.create("dist_sync")
kv.init(3, mx.nd.zeros((4,)))
out = mx.nd.zeros((4,))
kv.pushpull(3, mx.nd.ones((4,)) * (kv.rank + 1), out=out)
n = kv.num_workers
assert out.asnumpy().tolist() == [n * (n + 1) / 2] * 4, out
# A file per worker: the launcher relays both workers' output on one pipe, where their
# lines can interleave mid-line.
with open(os.path.join(os.environ["KV_SUM_OUT"], f"worker-{kv.rank}.txt"), "w") as f:
    f.write(f"worker {kv.rank} of {n} summed {out.asnumpy().tolist()}")
"""


def run_bounded(
    cmd: list[str],
    env: dict[str, str],
    timeout: float,
    before_kill: Callable[[], None] | None = None,
) -> tuple[int, str]:
    """Run in a session of its own; on timeout the whole session is killed, and whatever of
    it is left after the command (``before_kill`` runs first) is killed too."""
    import signal
    import subprocess

    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -1, out.decode(errors="replace")
    else:
        if before_kill is not None:
            before_kill()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything of the session still there
    return proc.returncode, out.decode(errors="replace")


def test_mxnets_launch_py_runs_a_dist_sync_job_through_the_python_3_9_entry(
    tmp_path: Path,
) -> None:
    import sys

    host = socket.gethostbyname(socket.getfqdn())
    if not host.startswith("127."):
        pytest.skip(f"dmlc_tracker would put the scheduler on {host}, not on loopback")
    job = tmp_path / "kv_sum_job.py"
    job.write_text(KV_SUM_JOB)
    run_id = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
    env.update({RUN_ID_ENV: run_id, "DMLC_NODE_HOST": "127.0.0.1", "OMP_NUM_THREADS": "1"})
    env["KV_SUM_OUT"] = str(tmp_path)
    args = ["-n", "2", "-s", "1", "--launcher", "local", sys.executable, str(job)]
    entry = [sys.executable, "-m", "pytest_mxperf.distributed.mxnet_launch", *args]
    left: list[int] = []

    def on_exit() -> None:  # the entry point has returned; its session is not ended yet
        left.extend(pids_with_env(RUN_ID_ENV, run_id))

    code, out = run_bounded(entry, env, timeout=120, before_kill=on_exit)
    assert code == 0, out
    done = {f.name: f.read_text() for f in tmp_path.glob("worker-*.txt")}
    assert done == {
        "worker-0.txt": "worker 0 of 2 summed [3.0, 3.0, 3.0, 3.0]",
        "worker-1.txt": "worker 1 of 2 summed [3.0, 3.0, 3.0, 3.0]",
    }, out
    # Every rank had ended when the entry point returned (it waits for the launcher's threads).
    assert left == []


def test_mxnets_tracker_calls_thread_isalive_which_this_python_lacks() -> None:
    # What the entry point is for; if a later MXNet fixes its tracker, this says so.
    import threading

    from pytest_mxperf.distributed.mxnet_launch import launch_script

    tracker = launch_script().parent.parent.parent / "dmlc_tracker" / "tracker.py"
    assert "self.thread.isAlive()" in tracker.read_text()
    assert not hasattr(threading.Thread, "isAlive")


# oneDNN weight layouts ------------------------------------------------------------------------


def default_layout(array: Any) -> bool:
    """Whether MXNet can hand out the array's memory as is (DLPack needs the default
    layout: an array in a oneDNN layout raises "We can't generate TBlob for MKLDNN data")."""
    try:
        capsule = mx.nd.to_dlpack_for_read(array)
    except mx.base.MXNetError as exc:
        assert "MKLDNN" in str(exc)
        return False
    del capsule
    return True


def weights_of(net: Any) -> list[Any]:
    params = net.collect_params()
    return [p.data() for name, p in params.items() if name.endswith("weight")]


def test_an_inference_forward_leaves_conv_weights_that_default_layouts_restores() -> None:
    from pytest_mxperf.distributed.train import default_layouts

    net = models.biased_convnet()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.ones((1, 3, 16, 16)))  # inference mode: oneDNN keeps conv weights its own way
    mx.nd.waitall()
    weights = weights_of(net)
    if all(default_layout(w) for w in weights):
        pytest.skip("this MXNet build keeps weights in the default layout (no oneDNN)")
    values = [w.asnumpy() for w in weights]
    default_layouts(mx, net.collect_params())
    assert all(default_layout(w) for w in weights)
    assert all((w.asnumpy() == v).all() for w, v in zip(weights, values))


def test_the_training_step_leaves_weights_in_the_default_layout() -> None:
    # Its forward that finds the number of classes used to run in inference mode.
    from pytest_mxperf.distributed.train import build_training_step

    net = models.biased_convnet()
    spec = replace(
        SPEC,
        factory="mxperf_dp_models:biased_convnet",
        kvstore="local",
        contexts=("cpu(0)",),
        input_shape=(3, 16, 16),
        batch_per_device=2,
    )
    build_training_step(mx, net, [mx.cpu(0)], spec, kv=None)
    mx.nd.waitall()
    assert all(default_layout(w) for w in weights_of(net))


def test_default_layouts_skips_parameters_not_initialized_yet() -> None:
    from pytest_mxperf.distributed.train import default_layouts

    net = models.biased_convnet()
    net.initialize()  # shapes unknown until the first forward: deferred
    default_layouts(mx, net.collect_params())
    net(mx.nd.ones((1, 3, 16, 16)))


# in one process -----------------------------------------------------------------------------


def test_in_process_two_cpu_contexts_with_local_kvstore(no_test_env: pytest.MonkeyPatch) -> None:
    spec = replace(SPEC, kvstore="local", contexts=("cpu(0)", "cpu(1)"))
    result = run_in_process(spec)
    assert (result.kvstore, result.world_size) == ("local", 2)
    (single,) = result.single.workers
    (scaled,) = result.scaled.workers
    assert single.contexts == ("cpu(0)",) and scaled.contexts == ("cpu(0)", "cpu(1)")
    # One device needs no exchange (as Trainer decides), two go through the kvstore.
    assert single.compute is None and result.single.comm_share == 0.0
    assert scaled.compute is not None and 0 <= result.comm_share <= 1
    assert scaled.full.items_per_step == 2 * 16
    assert result.efficiency == result.images_per_sec / (2 * result.single.images_per_sec)


def test_exported_symbol_files_as_the_model(
    tmp_path: Path, no_test_env: pytest.MonkeyPatch
) -> None:
    net = models.dense_net()
    net.initialize()
    net.hybridize()
    net(mx.nd.zeros((1, 3, 32, 32)))
    net.export(str(tmp_path / "mlp"))
    symbol = str(tmp_path / "mlp-symbol.json")
    spec = replace(SPEC, factory=symbol, step_hook=None)
    # In one process, and in a launched worker (which imports nothing of the test).
    result = run_in_process(replace(spec, kvstore="local", contexts=("cpu(0)", "cpu(1)")))
    assert result.images_per_sec > 0
    assert result.scaled.workers[0].full.items_per_step == 2 * 16
    watch = Watch()
    (report,) = launch(replace(spec, workers=1), run_id=watch.run_id, on_poll=watch)
    assert report.images_per_sec > 0 and report.contexts == ("cpu(0)",)
    watch.assert_all_gone()


def _gpus() -> int:
    try:
        return int(mx.context.num_gpus())
    except Exception:
        return 0


@pytest.mark.skipif(_gpus() < 2, reason="MXNet sees fewer than 2 GPUs")
@pytest.mark.parametrize("kvstore", ["device", "nccl"])
def test_in_process_gpu_kvstores(kvstore: str, no_test_env: pytest.MonkeyPatch) -> None:
    spec = replace(SPEC, kvstore=kvstore, contexts=("gpu(0)", "gpu(1)"))
    result = run_in_process(spec)
    assert result.world_size == 2 and result.images_per_sec > 0
    assert result.scaled.workers[0].contexts == ("gpu(0)", "gpu(1)")


@pytest.mark.skipif(_gpus() < 2, reason="MXNet sees fewer than 2 GPUs")
def test_dist_device_sync_one_gpu_per_worker(no_test_env: pytest.MonkeyPatch) -> None:
    spec = replace(SPEC, kvstore="dist_device_sync", contexts=("gpu(0)",))
    result = run_distributed(spec)
    assert [w.contexts for w in result.scaled.workers] == [("gpu(0)",), ("gpu(1)",)]
