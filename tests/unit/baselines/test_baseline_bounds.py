"""The size bound of baseline files and files that are no regular file (issue #49): refused by
name, never read into memory or rewritten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from baseline_data import HW, SHA_A, commit, rec

from pytest_mxperf.baselines.store import BaselineError, load, store


def test_a_store_that_would_pass_the_size_bound_is_refused_and_keeps_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = store(tmp_path, HW, commit(SHA_A), {"a/inference/float32/bs1/cpu": rec(10.0)})
    before = path.read_bytes()
    monkeypatch.setattr("pytest_mxperf.baselines.store.MAX_FILE_BYTES", len(before) + 10)
    many = {f"m{i}/inference/float32/bs1/cpu": rec(10.0) for i in range(5)}
    with pytest.raises(BaselineError, match=r"would be 0\.0 MiB, over the 0 MiB"):
        store(tmp_path, HW, commit(SHA_A), many)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_baseline_path_that_is_no_regular_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / HW / f"{SHA_A}.json"
    path.parent.mkdir()
    os.mkfifo(path)  # reading it would wait for a writer for ever
    with pytest.raises(BaselineError, match="is not a regular file"):
        load(path)
