"""Checking outputs before a run and keeping results when writing fails after it."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from pytest_mxperf.run import outputs


def test_unwritable_names_the_blocking_path(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert outputs.unwritable(tmp_path / "new" / "deeper", directory=True) is None
    assert outputs.unwritable(tmp_path / "r.json", directory=False) is None
    assert outputs.unwritable(tmp_path / "file" / "b", directory=True) == (
        f"{tmp_path / 'file'} is not a directory"
    )
    assert outputs.unwritable(tmp_path / "file" / "x" / "r.json", directory=False) == (
        f"{tmp_path / 'file'} is not a directory"
    )
    assert outputs.unwritable(tmp_path, directory=False) == f"{tmp_path} is a directory"


def test_write_report_falls_back_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "file").write_text("x")
    where, problem = outputs.write_report(tmp_path / "file" / "r.json", {"cases": [1]}, "abc")
    assert where == tmp_path / "tmp" / "pytest-mxperf-report-abc.json"
    assert json.loads(where.read_text()) == {"cases": [1]}
    assert problem is not None
    assert problem.startswith(f"cannot write the JSON report to {tmp_path / 'file' / 'r.json'}: ")
    assert problem.endswith(f"; measured results saved to {where}")
    ok, none = outputs.write_report(tmp_path / "r.json", {}, "abc")
    assert (ok, none) == (tmp_path / "r.json", None)


def test_unwritable_takes_streams_and_links_and_names_a_socket(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert outputs.unwritable(fifo, directory=False) is None
    assert outputs.unwritable(Path("/dev/null"), directory=False) is None
    (tmp_path / "file").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "file" / "r.json")  # its target's folder is a regular file
    assert outputs.unwritable(link, directory=False) == f"{tmp_path / 'file'} is not a directory"
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        assert outputs.unwritable(path, directory=False) == (
            f"{path} is a socket, not a file, FIFO or character device"
        )
