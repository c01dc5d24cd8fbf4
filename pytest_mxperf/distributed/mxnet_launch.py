"""MXNet's own ``tools/launch.py`` on Python 3.9 and later: ``python -m
pytest_mxperf.distributed.mxnet_launch [launch.py arguments...]``.

MXNet 1.9.1's wheel ships ``mxnet/tools/launch.py`` and the ``dmlc_tracker`` package it
drives. ``dmlc_tracker/tracker.py`` waits for the scheduler with ``Thread.isAlive()``, which
Python 3.9 removed, so every launch dies with ``AttributeError: 'Thread' object has no
attribute 'isAlive'`` once the scheduler is started (and leaves that scheduler running).
This entry point makes ``isAlive`` an alias of ``is_alive`` in this process and then runs
MXNet's ``launch.py`` unchanged (``runpy``), with the arguments as given: ``--launcher
local``, ``ssh`` and ``mpi`` (with ``-H hostfile``), ``-n``, ``-s``, ``--env`` and the rest
work as MXNet documents them.

MXNet is located, not imported: importing it in a process that has ``DMLC_ROLE`` set would
start a ps-lite node here.

``launch.py`` returns once the scheduler has exited, while the threads that started the
workers and servers are daemons: a server may still be exiting, and would outlive the launch.
This entry point waits (up to `SETTLE_SECONDS`) for those threads, so the ranks they started
have ended when it returns.
"""

from __future__ import annotations

import importlib.util
import runpy
import sys
import threading
import time
from pathlib import Path

#: How long, after launch.py returns, to wait for the threads that run the ranks.
SETTLE_SECONDS = 30.0


def allow_is_alive() -> None:
    """``Thread.isAlive`` as ``dmlc_tracker`` calls it (an alias of ``is_alive``)."""
    if not hasattr(threading.Thread, "isAlive"):
        threading.Thread.isAlive = threading.Thread.is_alive  # type: ignore[attr-defined]


def launch_script() -> Path:
    """``mxnet/tools/launch.py`` of the installed MXNet, without importing MXNet."""
    spec = importlib.util.find_spec("mxnet")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("mxnet is not installed in this environment")
    script = Path(next(iter(spec.submodule_search_locations))) / "tools" / "launch.py"
    if not script.is_file():
        raise SystemExit(f"this MXNet has no tools/launch.py ({script} is missing)")
    return script


def main(argv: list[str] | None = None) -> int:
    """Run MXNet's launch.py with ``argv`` (default: this process's arguments)."""
    allow_is_alive()
    script = launch_script()
    sys.argv = [str(script), *(sys.argv[1:] if argv is None else argv)]
    runpy.run_path(str(script), run_name="__main__")
    settle(SETTLE_SECONDS)
    return 0


def settle(seconds: float) -> None:
    """Wait up to ``seconds`` for the other threads (dmlc_tracker's, each running one rank's
    command) to finish."""
    deadline = time.monotonic() + seconds
    for thread in threading.enumerate():
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


if __name__ == "__main__":
    sys.exit(main())
