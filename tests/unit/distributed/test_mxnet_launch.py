"""MXNet's own launcher (tools/launch.py) runs a dist_sync job through this package's entry
point for Python 3.9+, on 127.0.0.1, and every rank has ended when it returns."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from pathlib import Path
from typing import Callable

import pytest
from dp_ranks import pids_with_env

from pytest_mxperf.distributed.rank_env import RUN_ID_ENV

pytest.importorskip("mxnet")


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
