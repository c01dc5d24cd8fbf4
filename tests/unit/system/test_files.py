"""The one atomic writer: whole files only, readable like any file the user writes, nothing left
behind when a write fails."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_mxperf.system import files


def test_json_is_sorted_and_the_folder_is_made(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    files.write_json_atomic(path, {"b": 1, "a": 2})
    assert path.read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'


def test_the_file_gets_the_users_mode_not_mkstemps(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        files.write_text_atomic(tmp_path / "t.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "t.txt").stat().st_mode & 0o777 == 0o644


def test_a_failed_replace_keeps_the_old_target_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()  # os.replace of a file onto a directory fails
    (target / "kept").write_text("old")
    with pytest.raises(OSError):
        files.write_text_atomic(target, "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (target / "kept").read_text() == "old"


def test_nan_is_refused_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        files.write_json_atomic(tmp_path / "n.json", {"x": float("nan")})
    assert list(tmp_path.iterdir()) == []
    files.write_json_atomic(tmp_path / "n.json", {"x": float("nan")}, allow_nan=True)
    assert json.loads((tmp_path / "n.json").read_text())["x"] != 0
