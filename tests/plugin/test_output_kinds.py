"""Outputs that are not regular files, end to end (issue #49): a symlinked report stays a link,
a FIFO's reader gets the summary; neither is replaced by a file."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest


def test_the_json_report_goes_through_a_symlink(suite: pytest.Pytester) -> None:
    (suite.path / "reports").mkdir()
    (suite.path / "out.json").symlink_to(suite.path / "reports" / "run.json")
    result = suite.runpytest("--mxperf", "--mxperf-json=out.json")
    result.assert_outcomes(passed=2)
    assert (suite.path / "out.json").is_symlink()
    data = json.loads((suite.path / "reports" / "run.json").read_text())
    assert len(data["cases"]) == 2


def test_the_markdown_summary_goes_into_a_fifo_for_its_reader(suite: pytest.Pytester) -> None:
    fifo = suite.path / "summary.pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:  # a reader waiting before the run writes
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    result = suite.runpytest("--mxperf", f"--mxperf-markdown={fifo}")
    reader.join(timeout=30)
    result.assert_outcomes(passed=2)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert len(got) == 1 and b"alpha" in got[0] and b"|" in got[0]
