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
"""

from __future__ import annotations

import importlib.util
import runpy
import sys
import threading
from pathlib import Path


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
