"""Paired runs, reliability round 3 (issue 29): the pure parts (requirements of REV's
environment, a failed side's message, errors on either side, clipping long messages)."""

from __future__ import annotations

import pytest

from pytest_mxperf.config import parsers
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging.explain import clip_lines
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.paired import envs
from pytest_mxperf.paired.pairdata import HEAD, REV, PairedData, SideResult
from pytest_mxperf.paired.rounds import side_outcome
from pytest_mxperf.system.procgroup import Finished
from pytest_mxperf.testing import fake_blocks


def test_revs_environment_gets_the_plugins_requirements_without_extras() -> None:
    required = envs.plugin_requirements()
    names = {r.split("<")[0].split(">")[0].split("=")[0].strip().lower() for r in required}
    assert {"tabulate", "gitpython", "pytest", "numpy"} <= names
    assert not any("extra" in r or "mxnet" in r.lower() for r in required)
    assert envs.plugin_requirements("no-such-distribution-for-mxperf") == []


def test_the_requirements_are_part_of_an_environments_key(tmp_path: object) -> None:
    plain = envs.env_key("{python} -c pass", str(tmp_path), "a" * 40, "3.11")
    assert plain == envs.env_key("{python} -c pass", str(tmp_path), "a" * 40, "3.11", ())
    assert plain != envs.env_key("{python} -c pass", str(tmp_path), "a" * 40, "3.11", ["x<2"])


def test_a_side_that_died_without_results_says_how_with_its_last_lines() -> None:
    tail = "\n".join(f"line {i}" for i in range(30)) + "\nModuleNotFoundError: tabulate"
    died = side_outcome(SideResult(error="no results ([Errno 2])"), Finished(1, False, 1, tail), 9)
    assert died.error is not None
    first, *rest = died.error.splitlines()
    assert first == (
        "the side process exited with code 1 and wrote no results; the last lines of its output:"
    )
    assert rest[-1] == "ModuleNotFoundError: tabulate" and len(rest) == 15
    killed = side_outcome(SideResult(), Finished(-9, False, 1, ""), 9)
    assert killed.error == "the side process was killed by SIGKILL and wrote no results"
    # A side that ran and reported (pytest's exit 1: a test failed) keeps its results.
    ran = SideResult(collect_errors=[("t.py", "SyntaxError")])
    assert side_outcome(ran, Finished(1, False, 1, "x"), 9).error is None


def _case(status: Status = Status.OK, rate: float | None = 100.0, error: str = "") -> CaseResult:
    key = CaseKey("m", "inference", "float32", 8, "cpu")
    result = CaseResult(key=key, device="cpu(0)", hardware="cpu-test")
    result.status, result.error = status, error or None
    if rate is not None:
        result.measurement = fake_blocks(rate, 8, 0.0)
    return result


def _round(
    rev: CaseResult | None, head: CaseResult | None, head_error: str | None = None
) -> dict[str, SideResult]:
    key = "m/inference/float32/bs8/cpu"
    return {
        REV: SideResult({key: rev} if rev else {}),
        HEAD: SideResult({key: head} if head else {}, error=head_error),
    }


KEY = "m/inference/float32/bs8/cpu"


def test_an_error_on_either_side_is_broken_never_new() -> None:
    data = PairedData("HEAD", "a" * 40, head_name="the working tree")
    data.rounds = [
        _round(_case(), _case(Status.ERROR, None, "ValueError: breaks forward")),
        _round(_case(), _case(Status.ERROR, None, "ValueError: breaks forward")),
    ]
    assert data.broken_message(KEY) == (
        Status.ERROR,
        "the working tree's side measured nothing in rounds 1, 2: ValueError: breaks forward",
    )
    data.rounds = [_round(_case(Status.NAN, None), _case())]
    status, text = data.broken_message(KEY) or (None, "")
    assert status is Status.NAN and text.startswith("HEAD's side measured nothing in round 1")


def test_a_round_where_one_side_lost_a_case_the_other_measured_is_broken() -> None:
    data = PairedData("HEAD~1", "a" * 40)
    data.rounds = [
        _round(_case(), _case()),
        _round(_case(), None, head_error="the side process was killed by SIGKILL"),
        _round(_case(), None),
    ]
    assert data.broken(HEAD, KEY) == [
        (2, Status.ERROR, "the side process was killed by SIGKILL"),
        (3, Status.ERROR, "the side process did not report the case"),
    ]
    assert data.broken(REV, KEY) == []


def test_a_case_revs_side_never_had_is_not_broken() -> None:
    # It does not exist at REV (or REV's file does not collect): "new", with the reason.
    data = PairedData("HEAD~1", "a" * 40)
    data.rounds = [_round(None, _case()), _round(None, _case())]
    assert data.broken(REV, KEY) == [] and data.broken_message(KEY) is None


def test_clip_lines_keeps_the_first_and_last_whole_lines() -> None:
    text = "first line\n" + "\n".join(f"frame {i:03d}" for i in range(500)) + "\nSyntaxError: x"
    clipped = clip_lines(text, limit=200)
    lines = clipped.splitlines()
    assert lines[0] == "first line" and lines[-1] == "SyntaxError: x"
    assert lines[1].startswith("... (") and len(clipped) < 260
    assert all(line.startswith("frame ") for line in lines[2:-1])
    assert clip_lines("short") == "short"


@pytest.mark.parametrize("text", ["", "  "])
def test_an_empty_revision_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="an empty revision"):
        parsers.revision(text)
    assert parsers.revision("HEAD~1") == "HEAD~1"
