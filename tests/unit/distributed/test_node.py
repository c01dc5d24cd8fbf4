"""A data-parallel case's scheduler, and a server that only sums (sync kvstores), run ps-lite's
node on MXNet's C library alone, not after ``import mxnet``'s Python side; a server that
applies the optimizer (async) still imports it. That they run is every sync launch's test
(tests/unit/distributed/test_dataparallel_mxnet.py); which path a rank takes is tested here."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_mxperf.distributed import node, rank
from pytest_mxperf.measuring.dp_scaling import DataParallelSpec
from pytest_mxperf.system import mxnet_import

SYNC = DataParallelSpec(factory="m:f", batch_per_device=8, kvstore="dist_sync", workers=2)


@pytest.mark.parametrize(
    ("role", "kvstore", "path"),
    [
        ("scheduler", "dist_sync", "library"),
        ("scheduler", "dist_async", "library"),
        ("server", "dist_sync", "library"),
        ("server", "dist_device_sync", "library"),
        ("server", "dist_async", "import mxnet"),
        ("worker", "dist_sync", "worker"),
    ],
)
def test_each_role_takes_its_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, role: str, kvstore: str, path: str
) -> None:
    taken: list[str] = []
    monkeypatch.setenv("DMLC_ROLE", role)
    monkeypatch.setattr(rank, "run_node", lambda: taken.append("library"))
    monkeypatch.setattr(mxnet_import, "import_mxnet", lambda: taken.append("import mxnet"))

    def worker(spec: DataParallelSpec) -> None:
        taken.append("worker")
        raise SystemExit(0)  # before it writes a report

    monkeypatch.setattr(rank, "run_worker", worker)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(replace(SYNC, kvstore=kvstore).as_dict()))
    with pytest.raises(SystemExit) if path == "worker" else contextlib.nullcontext():
        assert rank.main(["--spec", str(spec_file), "--out", str(tmp_path / "w.json")]) == 0
    assert taken == [path]


def test_the_library_alone_is_mxnets_own_without_its_python_side() -> None:
    pytest.importorskip("mxnet")
    code = (
        "import ctypes, sys\n"
        "from pytest_mxperf.system.mxnet_import import load_library\n"
        "lib = load_library()\n"
        "version = ctypes.c_int()\n"
        "assert lib.MXGetVersion(ctypes.byref(version)) == 0\n"
        "print(version.value, 'mxnet' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    import mxnet

    major, minor, patch = (int(part) for part in mxnet.__version__.split(".")[:3])
    assert out.stdout.split() == [str(major * 10000 + minor * 100 + patch), "False"]


def test_a_command_for_the_python_controller_ends_a_library_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An optimizer sent to a server that cannot unpickle it: the rank fails (the launcher
    # names it with this line), rather than summing on without the update asked for.
    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", exit_)
    with pytest.raises(SystemExit) as info:
        node._unexpected(0, b"pickled optimizer", None)
    assert info.value.code == 1
    assert "got controller command 0 (17 bytes)" in capsys.readouterr().err
