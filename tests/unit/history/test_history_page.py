"""The history page's index section as data: each commit's index and step, the marked steps
with their commit's subject and measured pairs; and ``mxperf report --history`` writing it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from history_data import entry

from pytest_mxperf.cli import main
from pytest_mxperf.history import entrystore, page
from pytest_mxperf.history.entries import Entry
from pytest_mxperf.history.index import case_fits, commit_order

C = [f"{i:02d}" + "f" * 38 for i in range(8)]
KEY = "alpha/inference/float32/bs8/cpu"


def _history() -> list[Entry]:
    ratios = [1.0, 1.0, 0.92, 1.0, 1.0, 1.0, 1.0]  # commit 3 is 8% slower
    found = [entry(C[i + 1], C[i], r, se=0.004) for i, r in enumerate(ratios)]
    found.append(entry(C[5], C[0], 0.92, se=0.004, run="anchor"))
    found[2] = dataclasses.replace(found[2], subject="slow down alpha", measured="d" * 40)
    return found


def test_the_pages_data_marks_the_step_with_its_commit_and_measured_pair() -> None:
    found = _history()
    order = commit_order(found)
    (case,) = page.index_data(found, case_fits(found, order), {C[0]: "first"})
    assert case.key == KEY and [p.commit for p in case.points] == C
    assert [p.commit for p in case.marked] == [C[3]]
    slow = case.marked[0]
    assert slow.subject == "slow down alpha" and slow.step == pytest.approx(0.92, abs=0.005)
    assert slow.measured == (
        f"0.920 [0.913 .. 0.927, 95%, 3 rounds] vs {C[2][:10]} on cpu-test-2c "
        f"(measured as {'d' * 10}, the same tree)",
    )
    assert "measured as" not in case.points[1].measured[0]  # a pair of the commit itself
    assert case.points[0].subject == "first" and case.points[0].step is None
    assert case.points[-1].index == pytest.approx(0.92, abs=0.01)
    assert case.level == 0.95 and case.step_level == 0.99 and case.note == ""
    # The anchor's commit lists both pairs that end there.
    assert len(case.points[5].measured) == 2


def test_report_with_history_writes_the_index_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("plotly")
    entrystore.DirStore(tmp_path / "hist").add(_history())
    out = tmp_path / "page.html"
    code = main(
        [
            "--dir",
            str(tmp_path / "none"),
            "report",
            "--out",
            str(out),
            "--history",
            str(tmp_path / "hist"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    text = out.read_text()
    assert "<h2>Index of paired ratios</h2>" in text and f'data-case="{KEY}"' in text
    assert f"marked: {C[3][:10]} (-8.0%) slow down alpha" in text
    assert (
        "A step is marked when it is at least 2.5% either way and its 99% interval "
        "excludes no change, or its own pair was judged regressed or improved" in text
    )
    assert "From the history in directory hist:" in text and str(tmp_path) not in text


def test_report_with_an_empty_history_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["report", "--out", str(tmp_path / "p.html"), "--history", str(tmp_path / "none")])
    assert code == 2
    assert "no entries in directory" in capsys.readouterr().err
