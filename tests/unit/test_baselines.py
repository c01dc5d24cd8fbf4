"""Stored baseline files (`pytest_mxperf.baselines.store`): atomic, merged, validated writes,
run history, machine ids and peaks (the choice of a baseline: test_baseline_resolution.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from baseline_data import HW, SHA_A, SHA_B, commit, rec

from pytest_mxperf.baselines.kept_runs import RUNS_KEPT
from pytest_mxperf.baselines.store import (
    LOCK_SLOTS,
    SCHEMA,
    BaselineError,
    commit_files,
    hardware_keys,
    load,
    store,
)
from pytest_mxperf.system import files, locks


def test_store_then_load(tmp_path: Path) -> None:
    path = store(tmp_path, HW, commit(SHA_A), {"m/inference/float32/bs1/cpu": rec(10.0)})
    assert path == tmp_path / HW / f"{SHA_A}.json"
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    data = json.loads(text)
    assert data["schema"] == SCHEMA == 1
    assert data["hardware"] == HW
    assert data["commit"] == commit(SHA_A)
    # Sorted keys, indented: a stable, diff-friendly file.
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    f = load(path)
    assert f.hardware == HW
    assert f.sha == SHA_A
    assert f.date == "2024-01-01T00:00:00+00:00"
    assert {k: c.as_dict() for k, c in f.cases.items()} == {
        "m/inference/float32/bs1/cpu": {**rec(10.0), "runs": [10.0], "machine_ids": [None]}
    }


def test_restore_merges_and_keeps_run_history(tmp_path: Path) -> None:
    store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0), "y": rec(20.0)})
    for rate in (11.0, 12.0, 13.0, 14.0, 15.0, 16.0):
        store(tmp_path, HW, commit(SHA_A), {"x": rec(rate, note=rate)})
    cases = load(tmp_path / HW / f"{SHA_A}.json").cases
    assert cases["x"].record["images_per_sec"] == 14.0  # median of the runs kept
    assert cases["x"].record["last_images_per_sec"] == 16.0
    assert cases["x"].record["note"] == 16.0  # replaced, not merged field by field
    assert cases["x"].record["runs"] == [12.0, 13.0, 14.0, 15.0, 16.0]
    assert len(cases["x"].record["runs"]) == RUNS_KEPT == 5
    assert cases["y"].as_dict() == {
        **rec(20.0),
        "runs": [20.0],
        "machine_ids": [None],
    }  # not re-measured: untouched


def test_run_history_restarts_when_the_setup_changes(tmp_path: Path) -> None:
    store(tmp_path, HW, commit(SHA_A), {"x": {**rec(10.0), "threads": {"omp_threads": 1}}})
    store(tmp_path, HW, commit(SHA_A), {"x": {**rec(12.0), "threads": {"omp_threads": 1}}})
    store(tmp_path, HW, commit(SHA_A), {"x": {**rec(30.0), "threads": {"omp_threads": 2}}})
    case = load(tmp_path / HW / f"{SHA_A}.json").cases["x"]
    assert case.runs == (30.0,) and case.images_per_sec == 30.0


def test_restore_updates_the_commit_record(tmp_path: Path) -> None:
    store(tmp_path, HW, commit(SHA_A, dirty=False), {"x": rec(10.0)})
    store(tmp_path, HW, commit(SHA_A, dirty=True), {"y": rec(1.0)})
    f = load(tmp_path / HW / f"{SHA_A}.json")
    assert f.commit["dirty"] is True
    assert set(f.cases) == {"x", "y"}


def test_oom_runs_are_not_kept_as_history(tmp_path: Path) -> None:
    store(tmp_path, HW, commit(SHA_A), {"x": rec(None)})
    store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0)})
    assert load(tmp_path / HW / f"{SHA_A}.json").cases["x"].record["runs"] == [10.0]


def _interrupt(*args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt


def test_interrupted_write_leaves_old_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0)})
    before = path.read_bytes()
    monkeypatch.setattr(os, "replace", _interrupt)
    with pytest.raises(KeyboardInterrupt):
        store(tmp_path, HW, commit(SHA_A), {"x": rec(99.0), "y": rec(1.0)})
    monkeypatch.undo()
    assert path.read_bytes() == before
    leftovers = sorted(p.name for p in (tmp_path / HW).iterdir())
    assert leftovers == [f"{SHA_A}.json"]  # no temp file, and no lock file to commit


def test_interrupted_first_write_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "replace", _interrupt)
    with pytest.raises(KeyboardInterrupt):
        store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0)})
    assert [p.name for p in (tmp_path / HW).iterdir()] == []


def write(tmp_path: Path, text: str, sha: str = SHA_A) -> Path:
    path = tmp_path / HW / f"{sha}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def good(**overrides: Any) -> dict[str, Any]:
    return {"schema": 1, "hardware": HW, "commit": commit(SHA_A), "cases": {}, **overrides}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "has no 'schema' field"),
        ("{}", "has no 'schema' field"),
        (json.dumps(good(schema=99)), "uses schema 99, newer than this pytest-mxperf"),
        (json.dumps(good(schema=0)), "invalid schema 0"),
        (json.dumps(good(schema="1")), "invalid schema '1'"),
        (json.dumps(good(cases=[])), "lacks 'cases' or 'commit'"),
        (json.dumps(good(commit=None)), "lacks 'cases' or 'commit'"),
        (
            json.dumps(good(cases={"x": {"images_per_sec": -1}})),
            "case 'x': 'images_per_sec' must be > 0",
        ),
        (json.dumps(good(cases={"x": {"images_per_sec": "9"}})), "must be a finite number"),
        (json.dumps(good(cases={"x": {"images_per_sec": True}})), "must be a finite number"),
        (json.dumps(good(cases={"x": {"images_per_sec": 0}})), "'images_per_sec' must be > 0"),
        (json.dumps(good(cases={"x": {"images_per_sec": 9, "rel_iqr": "low"}})), "'rel_iqr'"),
        (json.dumps(good(cases={"x": {"images_per_sec": 9, "runs": "x"}})), "'runs' must be"),
        (json.dumps(good(cases={"x": {"images_per_sec": 9, "runs": [1, "a"]}})), "'runs'"),
        (json.dumps(good(cases={"x": {"images_per_sec": 9, "software": []}})), "'software'"),
        (json.dumps(good(cases={"x": {"images_per_sec": 9, "status": "meh"}})), "'status'"),
        ('{"schema": 1, "commit": {}, "cases": {"x": {"images_per_sec": NaN}}}', "case 'x'"),
        (json.dumps(good(cases={"x": 5.0})), "case 'x' is not an object"),
    ],
)
def test_load_rejects_bad_files_naming_them(tmp_path: Path, content: str, needle: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(BaselineError) as info:
        load(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_newer_schema_says_upgrade(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps(good(schema=99)))
    with pytest.raises(BaselineError, match="upgrade pytest-mxperf"):
        load(path)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="cannot read baseline file"):
        load(tmp_path / HW / f"{SHA_A}.json")


def test_load_accepts_oom_cases(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps(good(cases={"x": {"images_per_sec": None}})))
    assert load(path).cases["x"].record["images_per_sec"] is None


def test_store_over_a_corrupt_file_raises_and_leaves_it(tmp_path: Path) -> None:
    path = write(tmp_path, "{corrupt")
    with pytest.raises(BaselineError, match="not valid JSON"):
        store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0)})
    assert path.read_text(encoding="utf-8") == "{corrupt"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("sha", [None, "", "HEAD", "abc", "G" * 40, "A" * 40])
def test_store_without_a_sha_is_refused(tmp_path: Path, sha: str | None) -> None:
    with pytest.raises(BaselineError, match="without a git commit sha"):
        store(tmp_path, HW, {"sha": sha}, {"x": rec(1.0)})
    assert not (tmp_path / HW).exists() or not list((tmp_path / HW).glob("*.json"))


@pytest.mark.parametrize("hw", ["", "../evil", "a/b", ".hidden", "has space", "-dash-first"])
def test_bad_hardware_key_is_refused(tmp_path: Path, hw: str) -> None:
    with pytest.raises(BaselineError, match="invalid hardware key"):
        store(tmp_path, hw, commit(SHA_A), {"x": rec(1.0)})
    assert list(tmp_path.rglob("*.json")) == []


def test_store_rejects_nan_rates(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        store(tmp_path, HW, commit(SHA_A), {"x": rec(float("nan"))})
    assert not (tmp_path / HW / f"{SHA_A}.json").exists()


def _store_many(root: str, prefix: str, count: int) -> None:
    for i in range(count):
        store(Path(root), HW, commit(SHA_A), {f"{prefix}{i}": rec(float(i + 1))})


@pytest.mark.skipif(sys.platform == "win32", reason="needs fork and fcntl")
def test_two_processes_storing_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_store_many, args=(str(tmp_path), p, 20)) for p in "pq"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    path = tmp_path / HW / f"{SHA_A}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert set(data["cases"]) == {f"{p}{i}" for p in "pq" for i in range(20)}
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_stores_in_many_directories_leave_a_bounded_number_of_lock_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every checkout (and every test repository) that stores a baseline has a write lock in
    # the user's lock directory; they share LOCK_SLOTS files instead of one each for ever.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    roots = [tmp_path / f"checkout{i}" / "baselines" for i in range(3 * LOCK_SLOTS)]
    for i, root in enumerate(roots):
        store(root, HW, commit(SHA_A), {"x": rec(float(i + 1))})
    assert [load(root / HW / f"{SHA_A}.json").cases["x"].images_per_sec for root in roots] == [
        float(i + 1) for i in range(len(roots))
    ]
    found = list(locks.machine_lock_dir().glob("baselines-*.lock"))
    assert 1 < len(found) <= LOCK_SLOTS


def test_hardware_keys_and_commit_files(tmp_path: Path) -> None:
    assert hardware_keys(tmp_path / "missing") == []
    store(tmp_path, HW, commit(SHA_A), {"x": rec(1.0)})
    store(tmp_path, "gpu-v100-x1", commit(SHA_B), {"x": rec(1.0)})
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.md").write_text("not a key")
    (tmp_path / HW / "notes.json").write_text("{}")
    assert hardware_keys(tmp_path) == ["cpu-amd-epyc-2c", "gpu-v100-x1"]
    assert commit_files(tmp_path, HW) == {SHA_A: tmp_path / HW / f"{SHA_A}.json"}
    assert commit_files(tmp_path, "nope") == {}


def test_write_json_atomic_creates_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "f.json"
    files.write_json_atomic(path, {"b": 1, "a": [1, 2]})
    assert path.read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    assert os.listdir(path.parent) == ["f.json"]


def test_each_run_keeps_the_anonymous_id_of_its_machine(tmp_path: Path) -> None:
    store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0, machine_id="m1")})
    store(tmp_path, HW, commit(SHA_A), {"x": rec(12.0, machine_id="m2")})
    case = load(tmp_path / HW / f"{SHA_A}.json").cases["x"]
    assert case.runs == (10.0, 12.0) and case.machine_ids == ("m1", "m2")


def test_older_files_without_machine_ids_are_padded(tmp_path: Path) -> None:
    path = tmp_path / HW / f"{SHA_A}.json"
    path.parent.mkdir(parents=True)
    old = {"images_per_sec": 10.0, "runs": [9.0, 10.0, 11.0], "status": "ok"}
    path.write_text(json.dumps({"schema": 1, "commit": commit(SHA_A), "cases": {"x": old}}))
    store(tmp_path, HW, commit(SHA_A), {"x": rec(12.0, machine_id="m1")})
    case = load(path).cases["x"]
    assert case.runs == (9.0, 10.0, 11.0, 12.0)
    assert case.machine_ids == (None, None, None, "m1")


def test_bad_machine_ids_are_named(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps(good(cases={"x": {"images_per_sec": 1, "machine_ids": 3}})))
    with pytest.raises(BaselineError, match="'machine_ids' must be a list"):
        load(path)


def test_clean_update_drops_runs_measured_on_a_dirty_tree(tmp_path: Path) -> None:
    key = "m/inference/float32/bs8/cpu"
    store(tmp_path, HW, commit(SHA_A, dirty=True), {key: rec(900.0, dirty=True)})
    store(tmp_path, HW, commit(SHA_A, dirty=True), {key: rec(800.0, dirty=True)})
    path = store(tmp_path, HW, commit(SHA_A), {key: rec(100.0, dirty=False)})
    data = json.loads(path.read_text())
    case = data["cases"][key]
    assert data["commit"]["dirty"] is False and case["dirty"] is False
    assert case["runs"] == [100.0] and case["images_per_sec"] == 100.0
    # clean runs go on accumulating; a dirty run added to clean ones marks the case dirty
    store(tmp_path, HW, commit(SHA_A), {key: rec(110.0, dirty=False)})
    assert load(path).cases[key].runs == (100.0, 110.0)
    store(tmp_path, HW, commit(SHA_A, dirty=True), {key: rec(120.0, dirty=True)})
    assert load(path).cases[key].dirty is True


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_respect_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        path = store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0)})
        files.write_json_atomic(tmp_path / "report.json", {"a": 1})
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == mode
    assert (tmp_path / "report.json").stat().st_mode & 0o777 == mode


def test_stored_peaks_are_kept_like_runs_and_judged_as_a_range(tmp_path: Path) -> None:
    for peak in (100.0, 110.0, 95.0):
        store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0, peak_memory_mb=peak)})
    case = load(tmp_path / HW / f"{SHA_A}.json").cases["x"]
    assert case.peak_memory_runs == (100.0, 110.0, 95.0) and case.peak_memory_mb == 95.0
    # A run is judged against the nearest stored peak: one process's peak moves ~10%.
    assert case.memory_reference(120.0) == 110.0
    assert case.memory_reference(90.0) == 95.0
    assert case.memory_reference(104.0) == 104.0
    assert case.memory_reference(None) == 100.0  # the median, when there is no figure now
    for peak in (101.0, 102.0, 103.0):
        store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0, peak_memory_mb=peak)})
    kept = load(tmp_path / HW / f"{SHA_A}.json").cases["x"].peak_memory_runs
    assert kept == (110.0, 95.0, 101.0, 102.0, 103.0) and len(kept) == RUNS_KEPT


def test_peaks_of_a_file_from_before_they_were_kept(tmp_path: Path) -> None:
    path = store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0)})
    data = json.loads(path.read_text())
    data["cases"]["x"]["peak_memory_mb"] = 80.0  # one peak, no list: an older file
    path.write_text(json.dumps(data))
    old = load(path).cases["x"]
    assert old.peak_memory_runs == () and old.memory_reference(100.0) == 80.0
    store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0, peak_memory_mb=90.0)})
    assert load(path).cases["x"].peak_memory_runs == (80.0, 90.0)
    assert load(path).cases["x"].memory_reference(None) == 85.0


def test_a_bad_list_of_peaks_is_named(tmp_path: Path) -> None:
    path = store(tmp_path, HW, commit(SHA_A), {"x": rec(10.0)})
    data = json.loads(path.read_text())
    data["cases"]["x"]["peak_memory_runs"] = "lots"
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match="'peak_memory_runs' must be a list of numbers"):
        load(path)
