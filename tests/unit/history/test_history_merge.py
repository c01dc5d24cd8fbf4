"""``mxperf merge``: shard reports as one report and one summary; a missing, unreadable or
failed shard, a case in two shards and shards of different commits are named, exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_data import paired_report

from pytest_mxperf.cli import main
from pytest_mxperf.history import entries

A, B = "a" * 40, "b" * 40


def _shards(tmp_path: Path, *groups: dict[str, float]) -> list[Path]:
    paths = []
    for i, cases in enumerate(groups, 1):
        path = tmp_path / f"shard-{i}.json"
        path.write_text(json.dumps(paired_report(B, A, cases)))
        paths.append(path)
    return paths


def test_shards_merge_into_one_report_whose_entries_are_every_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _shards(tmp_path, {"alpha": 0.9}, {"beta": 1.0, "gamma": 1.0})
    out, md = tmp_path / "merged.json", tmp_path / "summary.md"
    args = [*map(str, paths), "--out", str(out), "--markdown", str(md), "--expect-shards", "2"]
    assert main(["merge", *args]) == 0
    shown = capsys.readouterr().out
    assert "alpha" in shown and "shard-1.json" in shown and "problem" not in shown
    merged = json.loads(out.read_text())
    assert [c["key"] for c in merged["cases"]] == ["alpha", "beta", "gamma"]
    assert [(s["name"], s["state"], s["cases"]) for s in merged["shards"]] == [
        ("shard-1.json", "ok", 1),
        ("shard-2.json", "ok", 2),
    ]
    assert sorted(e.case for e in entries.from_report(merged)) == ["alpha", "beta", "gamma"]
    assert "| alpha  | shard-1.json | regressed |" in md.read_text()


def test_a_missing_or_failed_shard_is_named_never_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _shards(tmp_path, {"alpha": 0.9}, {"beta": 1.0})
    failed = json.loads(paths[1].read_text())
    failed["crashed"] = [{"nodeid": "test_b.py::test_beta"}]
    paths[1].write_text(json.dumps(failed))
    missing = tmp_path / "shard-3.json"
    out = tmp_path / "merged.json"
    code = main(["merge", *map(str, [*paths, missing]), "--expect-shards", "4", "--out", str(out)])
    assert code == 1
    shown = capsys.readouterr().out
    assert "shard shard-2.json: failed: crashed: 1 case(s)" in shown
    assert "shard shard-3.json: missing: no report" in shown
    assert "4 shards expected, 3 report(s) given: 1 shard(s) missing" in shown
    merged = json.loads(out.read_text())
    assert len(merged["merge_problems"]) == 3 and [c["key"] for c in merged["cases"]] == [
        "alpha",
        "beta",
    ]


def test_shards_that_disagree_are_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _shards(tmp_path, {"alpha": 0.9}, {"alpha": 1.0})
    other = json.loads(paths[1].read_text())
    other["run"]["commit"]["sha"] = "c" * 40
    paths[1].write_text(json.dumps(other))
    assert main(["merge", *map(str, paths)]) == 1
    shown = capsys.readouterr().out
    assert "case alpha is in shards shard-1.json and shard-2.json" in shown
    assert "the shards measured different commits or pairs" in shown
