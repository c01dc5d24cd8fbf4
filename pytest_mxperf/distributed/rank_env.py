"""The environment of one launched rank: a free loopback port, its threads, DMLC_* variables."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from pytest_mxperf.distributed.rank import LOCAL_RANK_ENV
from pytest_mxperf.system import pluginpath

LOOPBACK = "127.0.0.1"
#: Carried by every launched rank, so a test can find any process of a run in /proc.
RUN_ID_ENV = "PYTEST_MXPERF_RUN_ID"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def usable_cpus() -> int:
    """Logical CPUs this process may run on (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads(workers: int, cpus: int | None = None) -> int:
    """OMP threads per worker so that N workers do not oversubscribe the cores."""
    return max(1, (cpus or usable_cpus()) // max(1, workers))


def rank_environment(
    base: Mapping[str, str],
    *,
    role: str,
    index: int,
    port: int,
    workers: int,
    servers: int,
    threads: int,
    run_id: str,
) -> dict[str, str]:
    """The environment of one rank, as MXNet's launcher builds it but bound to loopback."""
    env = {k: v for k, v in base.items() if not k.startswith(("DMLC_", "PS_"))}
    env.update(
        {
            "DMLC_ROLE": role,
            "DMLC_PS_ROOT_URI": LOOPBACK,
            "DMLC_PS_ROOT_PORT": str(port),
            "DMLC_NUM_WORKER": str(workers),
            "DMLC_NUM_SERVER": str(servers),
            # ps-lite binds workers and servers to this address instead of guessing one.
            "DMLC_NODE_HOST": LOOPBACK,
            "DMLC_TASK_ID": str(index),
            # Workers compute; scheduler and servers mostly wait and sum.
            "OMP_NUM_THREADS": str(threads if role == "worker" else 1),
            RUN_ID_ENV: run_id,
            "PYTHONPATH": os.pathsep.join(_import_path(base.get("PYTHONPATH", ""))),
        }
    )
    if role == "worker":
        env[LOCAL_RANK_ENV] = str(index)
    return env


def _import_path(existing: str) -> list[str]:
    """The controller's sys.path, so ranks import the factory module as this process does."""
    entries = [pluginpath.import_root(), *(p for p in sys.path if p), *existing.split(os.pathsep)]
    seen: list[str] = []
    for entry in entries:
        if entry and entry not in seen and Path(entry).exists():
            seen.append(entry)
    return seen
