"""Bad baseline files and unwritable outputs (issue #10): named, never overwritten, and the
measured results kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_mxperf.testing.repos import (
    git,
    spoil_baseline,
    store_speeds,
    stored_files,
)


def test_corrupt_baseline_is_named_and_never_overwritten(stored_suite: pytest.Pytester) -> None:
    path = stored_files(stored_suite.path)[0]
    path.write_text('{"schema": 1, "cases": {')
    result = stored_suite.runpytest("--mxperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*mxperf: error: baseline file {path} is not valid JSON*"])
    update = stored_suite.runpytest("--mxperf", "--mxperf-update")
    assert update.ret == pytest.ExitCode.TESTS_FAILED
    update.stdout.fnmatch_lines([f"*baseline not written: baseline file {path} is not valid JSON*"])
    assert path.read_text() == '{"schema": 1, "cases": {'
    strict = stored_suite.runpytest("--mxperf", "--mxperf-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED


def test_future_schema_is_refused_by_name(stored_suite: pytest.Pytester) -> None:
    path = stored_files(stored_suite.path)[0]
    data = json.loads(path.read_text())
    data["schema"] = 7
    path.write_text(json.dumps(data))
    result = stored_suite.runpytest("--mxperf")
    result.stdout.fnmatch_lines([f"*baseline file {path} uses schema 7, newer than this*"])
    result.stdout.fnmatch_lines(["*mxperf verdicts: 2 new*"])


def test_compare_with_an_unreadable_baseline_is_a_usage_error(suite: pytest.Pytester) -> None:
    # The revision asked for has a file, but it cannot be read: nothing would be compared.
    store_speeds(suite, alpha=400, beta=200)
    (path,) = stored_files(suite.path)
    spoil_baseline(path, "rel_iqr", "low")
    result = suite.runpytest("--mxperf", "--mxperf-compare", path.stem[:10])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*--mxperf-compare '{path.stem[:10]}': its baseline cannot be used: baseline file "
            f"{path}: case *'rel_iqr' must be a finite number, got 'low'"
        ]
    )
    assert "mxperf: throughput" not in result.stdout.str()  # nothing was measured


@pytest.mark.parametrize(
    ("option", "where"),
    [("--mxperf-baseline-dir", "a-file/baselines"), ("--mxperf-json", "a-file/report.json")],
)
def test_unwritable_output_is_a_usage_error_before_measuring(
    suite: pytest.Pytester, option: str, where: str
) -> None:
    (suite.path / "a-file").write_text("a regular file\n")
    result = suite.runpytest("--mxperf", "--mxperf-update", option, where)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{where} (*a-file is not a directory)*"])
    assert option in result.stderr.str()
    assert "mxperf: throughput" not in result.stdout.str()  # nothing was measured


BLOCKER = """
import pathlib

def test_zz_block_outputs():
    # Outputs that were writable at the start become unwritable before the end of the run.
    for name in ("out", "bl"):
        pathlib.Path(name).write_text("now a regular file\\n")
"""


def test_write_failure_at_the_end_keeps_the_results(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_zz_blocker=BLOCKER)
    git(suite.path, "add", "-A")
    git(suite.path, "commit", "-qm", "blocker")
    result = suite.runpytest(
        "--mxperf", "--mxperf-update", "--mxperf-baseline-dir", "bl", "--mxperf-json", "out/r.json"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3)
    text = result.stdout.str()
    assert "Traceback" not in text and "Error:" not in text.replace("error(s)", "")
    result.stdout.fnmatch_lines(
        [
            "*baseline not written: cannot write *bl*: *",
            "*cannot write the JSON report to out/r.json: *; measured results saved to *.json",
        ]
    )
    saved = Path(text.split("measured results saved to ")[1].split()[0])
    try:
        cases = json.loads(saved.read_text())["cases"]
        assert sorted(c["model"] for c in cases) == ["alpha", "beta"]
    finally:
        saved.unlink()


def test_update_never_rewrites_a_file_with_bad_values(stored_suite: pytest.Pytester) -> None:
    path = stored_files(stored_suite.path)[0]
    text = spoil_baseline(path, "images_per_sec", "fast")
    update = stored_suite.runpytest("--mxperf", "--mxperf-update")
    assert update.ret == pytest.ExitCode.TESTS_FAILED
    update.stdout.fnmatch_lines(
        [f"*baseline not written: baseline file {path}: case *'images_per_sec' must be a finite*"]
    )
    assert path.read_text() == text


@pytest.mark.parametrize("quiet", ["-q", "-qq"])
def test_corrupt_file_error_survives_quiet_runs(stored_suite: pytest.Pytester, quiet: str) -> None:
    path = stored_files(stored_suite.path)[0]
    path.write_text('{"schema": 1, "cases": {')
    result = stored_suite.runpytest("--mxperf", quiet, "--mxperf-json", "report.json")
    assert result.ret == pytest.ExitCode.OK  # not --mxperf-strict: the run goes on without it
    assert "mxperf: hardware" not in result.stdout.str()  # the header is hidden
    result.stdout.fnmatch_lines([f"mxperf: error: baseline file {path} is not valid JSON*"])
    data = json.loads((stored_suite.path / "report.json").read_text())
    assert len(data["baseline_errors"]) == 1 and str(path) in data["baseline_errors"][0]
