"""The history of stored baselines along git's first-parent line, and without a repository."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from history_repo import HW, R18, REPO_BASELINES, make_scratch, repo_points

from pytest_mxperf.reporting.history import load_history
from pytest_mxperf.reporting.historytypes import Mark
from pytest_mxperf.reporting.htmlreport import render_html


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`history_repo.make_scratch`, built once for this file's tests (they only read it)."""
    return make_scratch(tmp_path_factory.mktemp("history"))


def test_history_follows_the_first_parent_line(scratch: dict[str, Any]) -> None:
    history = load_history(scratch["root"], floors=scratch["floors"])
    hw = {h.hardware: h for h in history.hardware}
    assert set(hw) == {HW, "cpu-amd-epyc-2c"}
    r18 = next(c for c in hw[HW].cases if c.key == R18)
    assert [p.commit.sha for p in r18.line] == scratch["line"]
    assert [p.commit.sha for p in r18.off_line] == [scratch["side"]]
    assert r18.off_line[0].commit.subject == "Experiment on a side branch"
    assert [p.mark for p in r18.line] == [
        Mark.NEW,
        Mark.PASS,
        Mark.REGRESSED,
        Mark.PASS,
        Mark.IMPROVED,
        Mark.PASS,
    ]
    assert r18.line[2].commit.subject == "Use a slower convolution layout"
    assert r18.line[0].commit.date == "2025-03-01 11:00:00"  # git's date, in UTC
    assert r18.floor == 70.0
    assert r18.latest.runs == pytest.approx((97.0 * 0.99, 97.0 * 1.01, 97.0))
    assert "not in the first-parent history" in hw[HW].notes[0]
    # This repository's files are unknown to the scratch repository: kept, placed by their dates.
    other = hw["cpu-amd-epyc-2c"]
    ours = repo_points()
    files = len(list((REPO_BASELINES / "cpu-amd-epyc-2c").glob("*.json")))
    assert all(not c.in_history and c.date_source == "file" for c in other.commits)
    assert {("cpu-amd-epyc-2c", c.key): len(c.points) for c in other.cases} == ours
    assert all(c.line == c.points for c in other.cases)
    assert f"None of the {files} stored commits is in the first-parent history" in other.notes[0]


def test_history_without_a_repository_orders_by_file_date(
    scratch: dict[str, Any], tmp_path: Path
) -> None:
    loose = tmp_path / "loose"
    shutil.copytree(scratch["root"], loose)
    history = load_history(loose)
    assert history.git.repo_root is None
    assert "No git repository" in history.notes[0]
    r18 = next(c for h in history.hardware if h.hardware == HW for c in h.cases if c.key == R18)
    dates = [p.commit.date for p in r18.line]
    assert dates == sorted(dates) and len(dates) == 7
    assert all(p.commit.subject == "" for p in r18.points)
    html = render_html(history)
    assert "No git repository holds" in html
