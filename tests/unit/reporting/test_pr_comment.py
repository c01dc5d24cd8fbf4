"""The pull-request comment rendered from a JSON report (`pytest_mxperf.reporting.pr_comment`) and
``mxperf comment render``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf import cli
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.reporting import pr_comment as comment
from pytest_mxperf.system import codec
from pytest_mxperf.testing import measurement_of

BASE = "0123456789abcdef0123456789abcdef01234567"


def case(key: str, rate: float, verdict: Verdict | None) -> dict[str, Any]:
    result = CaseResult(
        CaseKey.parse(key), "cpu", "cpu-x", measurement=measurement_of(rate), verdict=verdict
    )
    return codec.to_dict(result)


def report(*cases: dict[str, Any], paired: bool = True, errors: Any = ()) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": 1,
        "run": {"commit": {"sha": "feedfacefeedfacefeed"}},
        "cases": list(cases),
        "errors": list(errors),
        "crashed": [],
    }
    if paired:
        data["paired"] = {"rev": "origin/main", "rev_sha": BASE}
    return data


PASS = Verdict(Outcome.PASS, False, ("a: pass",), change=0.001, baseline_commit=BASE)
SLOWER = Verdict(
    Outcome.REGRESSED,
    True,
    (
        "tiny/inference/float32/bs8/cpu: HEAD vs origin/main: -10.0% (99% interval ...)",
        "img/s per round (origin/main/HEAD): 100.0/90.0",
        "",
        "line 3",
        "line 4",
        "line 5",
        "line 6",
        "line 7 is past the first lines",
    ),
    change=-0.1,
    baseline_images_per_sec=100.0,
    baseline_commit=BASE,
)


def test_a_passing_run_says_so_with_its_table() -> None:
    body = comment.render(report(case("tiny/inference/float32/bs8/cpu", 100.0, PASS)))
    lines = body.splitlines()
    assert lines[0] == comment.MARKER
    assert lines[2].startswith(":white_check_mark: **mxperf: pass** (1 case: 1 pass)")
    assert "paired with `origin/main` (`0123456789`)" in lines[2]
    assert "| `tiny/inference/float32/bs8/cpu` | cpu | 8 | 100.0 |" in body
    assert "What failed" not in body


def test_a_regression_names_the_case_the_change_and_the_commit() -> None:
    body = comment.render(
        report(
            case("tiny/inference/float32/bs8/cpu", 90.0, SLOWER),
            case("other/inference/float32/bs8/cpu", 50.0, PASS),
        ),
        run_url="https://github.invalid/o/p/actions/runs/1",
    )
    assert "**mxperf: regressed** (2 cases: 1 pass, 1 regressed)" in body
    assert "- `tiny/inference/float32/bs8/cpu`: regressed, -10.0% against `0123456789`" in body
    assert "  tiny/inference/float32/bs8/cpu: HEAD vs origin/main: -10.0%" in body
    assert "  line 6" in body and "line 7" not in body  # the first lines only, blank ones out
    assert body.rstrip().endswith("(https://github.invalid/o/p/actions/runs/1)")


def test_errors_and_failures_of_other_kinds() -> None:
    error = codec.to_dict(
        CaseResult(
            CaseKey.parse("bad/inference/float32/bs8/cpu"),
            "cpu",
            "cpu-x",
            status=Status.ERROR,
            error="Traceback\nValueError: no such layer",
        )
    )
    body = comment.render(report(error, paired=False))
    assert "**mxperf: failed**" in body and "against the stored baselines" in body
    assert "- `bad/inference/float32/bs8/cpu`: error" in body and "  ValueError: no such" in body
    no_commit = {
        **report(errors=["the baseline file x is unreadable\nmore"]),
        "run": {"commit": None},
    }
    run_error = comment.render(no_commit)
    assert ":warning: **mxperf: error** (0 cases)" in run_error
    assert "- the baseline file x is unreadable" in run_error and "more" not in run_error


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ([], "not an mxperf JSON report"),
        ({"schema": 9, "cases": []}, "report schema 9 is not 1"),
        ({"schema": 1, "cases": [{"nokey": 1}]}, "case 1 of the report is not a case record"),
    ],
)
def test_a_file_that_is_no_report_is_named(data: Any, why: str) -> None:
    with pytest.raises(comment.CommentError, match=why):
        comment.render(data)


def test_render_command_writes_the_body(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mxperf.json"
    path.write_text(json.dumps(report(case("tiny/inference/float32/bs8/cpu", 90.0, SLOWER))))
    out = tmp_path / "comment.md"
    assert cli.main(["comment", "render", str(path), "--out", str(out)]) == 0
    assert out.read_text().startswith(comment.MARKER + "\n")
    assert cli.main(["comment", "render", str(path)]) == 0
    assert capsys.readouterr().out == out.read_text()
    path.write_text("{not json")
    assert cli.main(["comment", "render", str(path)]) == 2
    assert f"mxperf: error: cannot read the report {path}" in capsys.readouterr().err
    assert cli.main(["comment", "render", str(tmp_path / "missing.json")]) == 2
