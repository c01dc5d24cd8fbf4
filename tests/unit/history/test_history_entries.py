"""History entries from paired reports, their identity and merge rule, and the stores that
keep them (a directory; a git branch written with plumbing, pushed with retries)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
from pathlib import Path

import pytest
from history_data import entry, paired_report

from pytest_mxperf.history import entries, entrystore
from pytest_mxperf.testing.repos import git

A, B, C = "a" * 40, "b" * 40, "c" * 40


def test_entries_from_a_paired_report_carry_the_pair_and_the_intervals_level() -> None:
    report = paired_report(B, A, {"alpha": 0.90, "beta": 1.00})
    found = {e.case: e for e in entries.from_report(report)}
    assert found["alpha"].commit == B and found["alpha"].base == A
    assert found["alpha"].ratio == pytest.approx(0.90)
    assert found["alpha"].level == 0.99  # a regression rests on the 99% interval
    assert found["beta"].level == 0.90  # a pass on the equivalence interval
    assert found["alpha"].hardware == "cpu-test-2c" and found["alpha"].rounds == 3
    assert found["alpha"].log_se == pytest.approx(
        (math.log(0.90 * 1.02) - math.log(0.90 * 0.98)) / 2 / 2.5758, rel=1e-3
    )


def test_a_report_of_another_kind_of_run_is_refused_by_name() -> None:
    report = paired_report(B, A, {"alpha": 1.0})
    del report["settings"]["ab"], report["paired"]
    with pytest.raises(entries.EntryError, match=r"r\.json is not from a paired run"):
        entries.from_report(report, "r.json")
    with pytest.raises(entries.EntryError, match="not an mxperf JSON report"):
        entries.from_report({"x": 1}, "r.json")


def test_the_same_pair_twice_is_one_entry_another_job_of_it_a_second() -> None:
    first = entry(B, A, 0.9, run="job-1")
    again = entry(B, A, 0.9, run="job-1")
    rerun = entry(B, A, 0.91, run="job-2")
    assert entries.union([first], [again]) == [first]
    assert len(entries.union([first], [again, rerun])) == 2
    # The union's text does not depend on the order things were added in.
    assert entries.to_text([rerun, first]) == entries.to_text([first, rerun, again])


def test_a_bad_stored_line_is_named(tmp_path: Path) -> None:
    (tmp_path / entrystore.FILE).write_text(entry(B, A).to_line() + "\n{not json\n")
    with pytest.raises(entrystore.StoreError, match=r"history\.jsonl, line 2"):
        entrystore.read_store(entrystore.DirStore(tmp_path))


def test_directory_store_adds_once_and_keeps_what_it_had(tmp_path: Path) -> None:
    where = entrystore.DirStore(tmp_path / "hist")
    assert where.add([entry(B, A)]) == 1
    assert where.add([entry(B, A), entry(C, B)]) == 1
    assert [e.commit for e in where.read()] == [B, C]


def _repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "f.txt").write_text("x\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "one")
    return path


def test_branch_store_never_touches_the_working_tree(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / "f.txt").write_text("edited, not committed\n")
    before = (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain"))
    where = entrystore.open_store(None, repo)
    assert isinstance(where, entrystore.GitStore) and where.remote is None
    assert where.add([entry(B, A)]) == 1
    assert where.add([entry(B, A)]) == 0  # idempotent: no new commit either
    assert (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")) == before
    assert git(repo, "rev-list", "--count", "mxperf-history") == "1"
    stored = git(repo, "show", f"mxperf-history:{entrystore.FILE}")
    assert [json.loads(line)["commit"] for line in stored.splitlines()] == [B]


def test_two_clones_adding_at_once_both_land_on_origin(tmp_path: Path) -> None:
    source = _repo(tmp_path / "source")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(origin))
    clones = []
    for name in ("one", "two"):
        git(tmp_path, "clone", "-q", str(origin), name)
        clones.append(entrystore.open_store("git:mxperf-history", tmp_path / name))
    assert all(isinstance(c, entrystore.GitStore) and c.remote == "origin" for c in clones)
    clones[0].add([entry(B, A, run="seed")])  # both start from a branch that exists
    clones[1].read()
    jobs = [[entry(C, B, run=f"one-{i}") for i in range(3)], [entry(C, B, run="two")]]
    threads = [threading.Thread(target=c.add, args=(j,)) for c, j in zip(clones, jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    final = entrystore.GitStore(origin, remote=None).read()
    assert sorted(e.run for e in final) == ["one-0", "one-1", "one-2", "seed", "two"]


def test_a_push_that_loses_the_race_is_fetched_and_reapplied(tmp_path: Path) -> None:
    source = _repo(tmp_path / "source")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(origin))
    git(tmp_path, "clone", "-q", str(origin), "one")
    git(tmp_path, "clone", "-q", str(origin), "two")
    one = entrystore.open_store(None, tmp_path / "one")
    two = entrystore.open_store(None, tmp_path / "two")
    assert isinstance(two, entrystore.GitStore)
    two.read()  # two saw the branch missing; one pushes first
    one.add([entry(B, A, run="one")])
    stale = two._tip()
    assert stale is None
    # Two builds its commit on the stale (missing) tip: the push is refused, not forced.
    commit = two._commit(stale, [entry(C, B, run="two")], 1)
    assert not two._publish(commit, stale)
    assert two.add([entry(C, B, run="two")]) == 1
    assert sorted(e.run for e in entrystore.GitStore(origin).read()) == ["one", "two"]


def test_a_job_that_dies_half_way_leaves_what_was_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _repo(tmp_path / "source")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(origin))
    git(tmp_path, "clone", "-q", str(origin), "job")
    where = entrystore.open_store(None, tmp_path / "job")
    assert isinstance(where, entrystore.GitStore)
    where.add([entry(B, A, run="earlier")])

    def killed(self: entrystore.GitStore, commit: str, tip: str | None) -> bool:
        raise KeyboardInterrupt  # the job is cancelled between its commit and its push

    monkeypatch.setattr(entrystore.GitStore, "_publish", killed)
    with pytest.raises(KeyboardInterrupt):
        where.add([entry(C, B, run="killed")])
    monkeypatch.undo()
    assert [e.run for e in entrystore.GitStore(origin).read()] == ["earlier"]
    assert where.add([entry(C, B, run="killed")]) == 1  # the rerun lands on top


def test_a_directory_write_that_fails_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = entrystore.DirStore(tmp_path)
    where.add([entry(B, A)])
    before = (tmp_path / entrystore.FILE).read_text()

    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError):
        where.add([entry(C, B)])
    monkeypatch.undo()
    assert (tmp_path / entrystore.FILE).read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_fields_a_newer_version_wrote_are_kept_when_the_file_is_rewritten(tmp_path: Path) -> None:
    line = json.loads(entry(B, A).to_line())
    line["queue_seconds"] = 12.5
    (tmp_path / entrystore.FILE).write_text(json.dumps(line) + "\n")
    entrystore.DirStore(tmp_path).add([entry(C, B)])
    first = json.loads((tmp_path / entrystore.FILE).read_text().splitlines()[0])
    assert first["queue_seconds"] == 12.5 and "extra" not in first
    del line["commit"]
    (tmp_path / entrystore.FILE).write_text(json.dumps(line) + "\n")
    with pytest.raises(entrystore.StoreError, match="line 1: not a history entry"):
        entrystore.read_store(entrystore.DirStore(tmp_path))


def test_a_line_of_another_schema_is_refused_and_the_file_left_alone(tmp_path: Path) -> None:
    line = json.loads(entry(B, A).to_line())
    assert line["schema"] == 1
    line["schema"] = 2
    text = json.dumps(line) + "\n"
    (tmp_path / entrystore.FILE).write_text(text)
    with pytest.raises(entries.EntryError, match="line 1: schema 2, this pytest-mxperf reads 1"):
        entrystore.DirStore(tmp_path).add([entry(C, B)])
    assert (tmp_path / entrystore.FILE).read_text() == text


def test_the_level_is_read_from_the_verdicts_field_before_its_message() -> None:
    report = paired_report(B, A, {"alpha": 0.90, "beta": 1.00})
    alpha, beta = report["cases"]
    # The field decides, whatever the message says (a message may be reworded or cut short).
    alpha["verdict"]["interval_level"] = 0.95
    beta["verdict"]["interval_level"] = 0.90
    beta["verdict"]["message"] = "beta: the message names no interval"
    found = {e.case: e for e in entries.from_report(report)}
    assert (found["alpha"].level, found["beta"].level) == (0.95, 0.90)
    # A report written before the field (no interval_level): read from the message, as before.
    old = paired_report(B, A, {"alpha": 0.90, "beta": 1.00})
    assert all("interval_level" not in c["verdict"] for c in old["cases"])
    found = {e.case: e for e in entries.from_report(old)}
    assert (found["alpha"].level, found["beta"].level) == (0.99, 0.90)


def test_an_unknown_level_in_the_field_is_refused_by_name() -> None:
    report = paired_report(B, A, {"alpha": 0.90})
    report["cases"][0]["verdict"]["interval_level"] = 0.42
    with pytest.raises(
        entries.EntryError,
        match=r"r\.json: case .alpha.: no quantile for an interval level of 0\.42",
    ):
        entries.from_report(report, "r.json")


def test_an_adopted_entry_keeps_the_sha_it_measured_and_others_write_no_such_field() -> None:
    plain = entry(B, A)
    assert "measured" not in json.loads(plain.to_line())  # lines stored before stay as they were
    adopted = dataclasses.replace(plain, measured=C)
    line = json.loads(adopted.to_line())
    assert line["measured"] == C
    assert entries.Entry.from_dict(line) == adopted
    line["measured"] = 7
    with pytest.raises(entries.EntryError, match="measured must be a commit sha, got 7"):
        entries.Entry.from_dict(line)
