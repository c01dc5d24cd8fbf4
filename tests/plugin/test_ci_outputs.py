"""CI summaries, cost and % of peak through a whole run (fake back end, exact numbers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

SUITE = """
from pytest_mxperf.testing import FakeModel

def test_graph(mxperf):
    mxperf.inference(FakeModel(images_per_sec=400.0, macs_per_image=10**7), batch_size=8,
                     model="graph")

def test_no_graph(mxperf):
    mxperf.inference(FakeModel(images_per_sec=200.0), batch_size=8, model="nograph")
"""


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_markdown_benchmark_action_and_step_summary(
    fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = fake_pytester.path / "step-summary.md"
    step.write_text("## earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    fake_pytester.makepyfile(SUITE)
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-markdown", "out/summary.md", "--mxperf-benchmark-action", "b.json"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["mxperf: summary written to out/summary.md"])
    markdown = (fake_pytester.path / "out" / "summary.md").read_text()
    assert "| `graph/inference/float32/bs8/cpu` |" in markdown
    assert "2 cases: 2 new" in markdown
    # Appended once to GitHub's job summary, after what earlier steps wrote.
    assert step.read_text() == "## earlier step\n" + markdown + "\n"
    entries = _json(fake_pytester.path / "b.json")
    assert [e["value"] for e in entries] == [pytest.approx(400.0), pytest.approx(200.0)]
    assert all(e["unit"] == "images/sec" for e in entries)


def test_unwritable_summary_is_a_usage_error_before_measuring(
    fake_pytester: pytest.Pytester,
) -> None:
    (fake_pytester.path / "afile").write_text("")
    fake_pytester.makepyfile(SUITE)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-markdown", "afile/s.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mxperf-markdown: cannot write afile/s.md*not a directory*"])


def test_cost_and_percent_of_peak(
    fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_MXPERF_PRICE_PER_HOUR", "3.6")
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for every column
    fake_pytester.makepyfile(SUITE)
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-epoch-images", "1000000", "--mxperf-json", "r.json"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "case*img/s*verdict*$/M img*epoch*% of peak*",
            "graph*new*$2.50*41 min 40 s $2.50*8.0%*",
            "nograph*new*$5.00*1 h 23 min $5.00*-*",
            "mxperf cost: $3.6 per hour, epoch = 1,000,000 images",
            "mxperf peak (matrix multiply): cpu(0) float32 100.0 GFLOP/s",
        ]
    )
    data = _json(fake_pytester.path / "r.json")
    graph, nograph = data["cases"]
    # 400 img/s x 2e7 FLOPs per image = 8 GFLOP/s of the fake back end's 100 GFLOP/s peak.
    assert graph["macs_per_image"] == 10**7 and graph["peak_gflops"] == 100.0
    assert graph["percent_of_peak"] == pytest.approx(8.0)
    assert graph["cost"]["dollars_per_million_images"] == pytest.approx(2.5)
    assert graph["cost"]["epoch_seconds"] == pytest.approx(2500.0)
    assert nograph["macs_per_image"] is None and nograph["percent_of_peak"] is None
    assert data["peaks"] == [
        {
            "device": "cpu(0)",
            "dtype": "float32",
            "hardware": graph["hardware"],
            "peak_gflops": 100.0,
        }
    ]
    assert data["settings"]["price_per_hour"] == 3.6


PROGRESS_SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("batch_size", [1, 8, 16])
def test_toy(mxperf, batch_size):
    mxperf.inference(FakeModel(images_per_sec=400.0), batch_size=batch_size, model="toy")

def test_gpu_only(mxperf):
    pytest.skip("no GPU")

def test_plain():
    pass
"""


def test_verbose_runs_show_progress_after_each_benchmark(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(PROGRESS_SUITE)
    result = fake_pytester.runpytest("--mxperf", "-v")
    result.assert_outcomes(passed=4, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*test_toy?1? PASSED*",
            "mxperf: measured toy/inference/float32/bs1/cpu (1/4, elapsed *)",
            "*test_toy?8? PASSED*",
            "mxperf: measured toy/inference/float32/bs8/cpu (2/4, elapsed *, about * left)",
            "*test_toy?16? PASSED*",
            "mxperf: measured toy/inference/float32/bs16/cpu (3/4, elapsed *, about * left)",
            "*test_plain PASSED*",
        ]
    )
    assert "mxperf: measured" not in fake_pytester.runpytest("--mxperf").stdout.str()


def test_progress_lines_under_xdist(fake_pytester: pytest.Pytester) -> None:
    """Under xdist the controller prints the lines (count and elapsed, no total: it collects
    nothing), one per benchmark, each on a line of its own between pytest's lines."""
    pytest.importorskip("xdist")
    fake_pytester.makepyfile(PROGRESS_SUITE)
    result = fake_pytester.runpytest("-n", "2", "--mxperf", "-v")
    result.assert_outcomes(passed=4, skipped=1)
    lines = result.stdout.lines
    progress = [line for line in lines if "mxperf: measured" in line]
    assert len(progress) == 3, progress
    assert all(line.startswith("mxperf: measured toy/inference/") for line in progress)
    counts = sorted(line.split("(")[1].split(",")[0] for line in progress)
    assert counts == ["1", "2", "3"]
    assert not any("about" in line and "left" in line for line in progress)
    # pytest's own per-test lines stay intact (no progress text glued onto them).
    assert sum("PASSED" in line and "test_toy" in line for line in lines) == 3
