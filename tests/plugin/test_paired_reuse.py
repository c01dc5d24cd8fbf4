"""A paired run's extra rounds measure only the cases still undecided: a test's other cases get
back their side's earlier result, unmeasured, and the test's own code after the call runs as
before (`paired.rounds._reusing`, `case.roles.Side`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_mxperf.testing.repos import commit_two, head_speeds, read_report

# One test, two cases. `steady`: 100 img/s on both sides, decided in the first two rounds.
# `wobbly`: REV at 100; HEAD's processes at 96, 86, 94, ... in turn, undecided for a few
# rounds. Every side process appends a line after each call returns, with what it got back.
WOBBLY_SPEEDS = (96.0, 86.0, 94.0)
TWO_CASES = """
CALLS = pathlib.Path({calls!r})

def test_two_cases(mxperf):
    side = "head" if IS_HEAD else "rev"
    steady = mxperf.inference(FakeModel(100.0), batch_size=8, model="steady")
    with CALLS.open("a") as f:
        f.write(f"{{side}} steady {{steady.status.value}} {{steady.images_per_sec}}\\n")
    assert steady.images_per_sec > 0
    wobbly = mxperf.inference(FakeModel(SPEED), batch_size=8, model="wobbly")
    with CALLS.open("a") as f:
        f.write(f"{{side}} wobbly {{wobbly.status.value}}\\n")
"""


def test_extra_rounds_measure_only_the_undecided_case_of_a_test(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], tmp_path: Path
) -> None:
    counter, calls = tmp_path / "count", tmp_path / "calls"
    suite = head_speeds(WOBBLY_SPEEDS, counter, fake_pytester.path)
    suite += TWO_CASES.format(calls=str(calls))
    commit_two(fake_pytester, suite)
    fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-max-rounds", "6",
        "--mxperf-pair-budget", "600", "--mxperf-json", "report.json",
    )  # fmt: skip
    report = read_report(fake_pytester.path)
    rounds = report["paired"]["rounds"]
    assert len(rounds) > 2, "the wobbly case needs extra rounds for this test to mean anything"
    steady = next(k for k in rounds[0]["rev"]["images_per_sec"] if k.startswith("steady/"))
    wobbly = next(k for k in rounds[0]["rev"]["images_per_sec"] if k.startswith("wobbly/"))
    for i, r in enumerate(rounds):
        for side in ("rev", "head"):
            measured = r[side]["images_per_sec"]
            assert wobbly in measured  # every round is for it
            # steady: measured in the first two rounds only, never again
            assert (steady in measured) == (i < 2), (i, side, sorted(measured))
    by_key = {c["key"]: c for c in report["cases"]}
    assert by_key[steady]["verdict"]["rounds"] == 2
    assert by_key[wobbly]["verdict"]["rounds"] == len(rounds)
    # The test's code ran whole in every side process of every round (and once in the
    # controller): the steady call returned the side's earlier figure (status ok) in the extra
    # rounds, and the call after it ran.
    lines = calls.read_text().splitlines()
    runs = 2 * len(rounds) + 1
    steady_lines = [line for line in lines if " steady " in line]
    assert len(steady_lines) == runs and len([x for x in lines if " wobbly " in x]) == runs
    assert all(line.split()[2] == "ok" for line in steady_lines)
    assert all(float(line.split()[3]) == pytest.approx(100.0) for line in steady_lines)


# One test, two cases: `steady` the same on both sides, `slower` 20% slower at HEAD.
SLOWER_SUITE = """
import pathlib
from pytest_mxperf.testing import FakeModel

HERE = pathlib.Path(__file__).resolve().parent
IS_HEAD = HERE == pathlib.Path({head!r}).resolve()

def test_two_cases(mxperf):
    mxperf.inference(FakeModel(100.0), batch_size=8, model="steady")
    mxperf.inference(FakeModel(80.0 if IS_HEAD else 100.0), batch_size=8, model="slower")
"""


def test_a_regressions_second_run_measures_only_the_cases_it_confirms(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    commit_two(fake_pytester, SLOWER_SUITE.format(head=str(fake_pytester.path)))
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(failed=1)
    paired = read_report(fake_pytester.path)["paired"]
    first, second = paired["rounds"], paired["confirmation"]["rounds"]
    assert all(len(r["head"]["images_per_sec"]) == 2 for r in first[:2])
    assert len(second) >= 2
    for r in second:  # fresh processes, the slower case alone: steady is handed back
        for side in ("rev", "head"):
            assert [k.split("/")[0] for k in r[side]["images_per_sec"]] == ["slower"]
    cases = {
        c["key"].split("/")[0]: c["verdict"]["status"]
        for c in read_report(fake_pytester.path)["cases"]
    }
    assert cases == {"steady": "pass", "slower": "regressed"}


# One test, three cases stored at 100 img/s; at HEAD `middle` is 20% slower. Every process
# appends a line after each call returns, with what it got back.
THREE_CASES = """
import pathlib
from pytest_mxperf.testing import FakeModel

MIDDLE = float(pathlib.Path(__file__).with_name("middle.txt").read_text())
CALLS = pathlib.Path({calls!r})

def test_three_cases(mxperf):
    for model, speed in (("before", 100.0), ("middle", MIDDLE), ("after", 100.0)):
        got = mxperf.inference(FakeModel(speed), batch_size=8, model=model)
        with CALLS.open("a") as f:
            f.write(f"{{model}} {{got.status.value}} {{got.images_per_sec}}\\n")
"""


def test_an_arbitration_pair_times_the_suspect_and_the_cases_after_it(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], tmp_path: Path
) -> None:
    """A suspected case's own pair hands the cases its test judged before it back to both
    sides from the first round, with this process's results: it times that case and those after
    it (which may take the same pair when suspected too), not its test whole."""
    calls = tmp_path / "calls"
    fake_pytester.makepyfile(test_suite=THREE_CASES.format(calls=str(calls)))
    (fake_pytester.path / "middle.txt").write_text("100.0")
    commit("A: three cases")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=1)
    (fake_pytester.path / "middle.txt").write_text("80.0")
    commit("B: middle slower")
    calls.unlink()
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(failed=1)
    report = read_report(fake_pytester.path)
    verdicts = {c["model"]: c["verdict"]["status"] for c in report["cases"]}
    assert verdicts == {"before": "pass", "middle": "regressed", "after": "pass"}
    (pair,) = report["pair_runs"]
    rounds = pair["rounds"] + pair["confirmation"]["rounds"] + pair["profile_rounds"]
    assert len(rounds) >= 5  # two of the first run, two of the second, the profile
    for r in rounds:
        for side in ("rev", "head"):
            models = sorted(k.split("/")[0] for k in r[side]["images_per_sec"])
            assert "before" not in models and "middle" in models, (side, models)
    assert all(sorted(k.split("/")[0] for k in r["rev"]["images_per_sec"]) == ["after", "middle"]
               for r in pair["rounds"][:2])  # fmt: skip
    # The test's code ran whole in every side process (and once here): `before`'s call got the
    # controller's figure back (status ok) and the calls after it ran.
    lines = calls.read_text().splitlines()
    runs = 1 + 2 * len(rounds)
    assert [line.split()[0] for line in lines].count("after") == runs
    before = [line for line in lines if line.startswith("before ")]
    assert len(before) == runs
    assert all(line.split()[1] == "ok" for line in before)
    assert float(before[0].split()[2]) == pytest.approx(100.0)
    assert len(set(before)) == 1  # the controller's figure, to the last digit


# One test, three cases stored at 100 img/s (commit A); at B `suspect` is 20% slower and `mate`
# wobbles at HEAD from process to process (the controller's figure first, then each side's).
MATE_A = """
from pytest_mxperf.testing import FakeModel

def test_three_cases(mxperf):
    for model in ("before", "suspect", "mate"):
        mxperf.inference(FakeModel(100.0), batch_size=8, model=model)
"""
MATE_B = """
def test_three_cases(mxperf):
    mxperf.inference(FakeModel(100.0), batch_size=8, model="before")
    mxperf.inference(FakeModel(80.0 if IS_HEAD else 100.0), batch_size=8, model="suspect")
    mxperf.inference(FakeModel(SPEED), batch_size=8, model="mate")
"""


def _suspect_and_mate(
    pytester: pytest.Pytester, commit: Callable[[str], str], tmp_path: Path, controller: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's one pair (for ``suspect``) and the cases' records, when the controller
    measures ``mate`` at ``controller`` and HEAD's sides at 96, 86, 94 in turn."""
    pytester.makepyfile(test_suite=MATE_A)
    commit("A: three cases")
    pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=1)
    counter = tmp_path / "count"
    suite = head_speeds((controller, 96.0, 86.0, 94.0), counter, pytester.path) + MATE_B
    pytester.makepyfile(test_suite=suite)
    commit("B: suspect slower, mate wobbly")
    pytester.runpytest("--mxperf", "--mxperf-json", "report.json", "--mxperf-pair-budget", "600")
    report = read_report(pytester.path)
    (pair,) = report["pair_runs"]
    return pair, {c["model"]: c for c in report["cases"]}


def _models(r: dict[str, Any]) -> list[str]:
    assert sorted(r["rev"]["images_per_sec"]) == sorted(r["head"]["images_per_sec"])
    return sorted(k.split("/")[0] for k in r["head"]["images_per_sec"])


def test_a_suspects_pair_gives_its_test_mates_their_first_rounds_only(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], tmp_path: Path
) -> None:
    """The pair that arbitrates `suspect` also times `mate` (after it in its test): its first
    rounds, which give its sides' figures; its stored comparison here (100 img/s) passes, so
    the rounds that would decide its pair, undecided as it wobbles, are never spent."""
    pair, cases = _suspect_and_mate(fake_pytester, commit, tmp_path, controller=100.0)
    rounds = pair["rounds"]
    assert cases["suspect"]["verdict"]["status"] == "regressed"
    assert cases["mate"]["verdict"]["status"] == "pass"
    models = [_models(r) for r in rounds]
    assert models[:2] == [["mate", "suspect"], ["mate", "suspect"]]
    assert all(m == ["suspect"] for m in models[2:])  # the suspect's own extra rounds, if any
    # nor a second run or a profile of it
    more = pair["confirmation"]["rounds"] + pair["profile_rounds"]
    assert more and all(_models(r) == ["suspect"] for r in more)


def test_a_test_mate_suspected_later_gets_the_rest_of_its_rounds_from_the_same_pair(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], tmp_path: Path
) -> None:
    """`mate` measured here at 90 img/s (10% below its stored figure) is suspected too: its
    arbitration takes the pair `suspect` started and adds the rounds that decide it, timing
    `mate` alone (the cases before it handed back)."""
    pair, cases = _suspect_and_mate(fake_pytester, commit, tmp_path, controller=90.0)
    rounds = pair["rounds"]
    models = [_models(r) for r in rounds]
    assert models[:2] == [["mate", "suspect"], ["mate", "suspect"]]
    # then the suspect's own extra rounds, if any, then mate's alone
    own = [m for m in models[2:] if m == ["suspect"]]
    later = models[2 + len(own) :]
    assert later, "mate's wobble must leave its first two rounds undecided"
    assert all(m == ["mate"] for m in later)
    # Found regressed, it is measured again on fresh processes as the suspect was: its rounds
    # join the same second run, and its verdict is that run's.
    assert cases["mate"]["verdict"]["status"] == "regressed"
    second = [_models(r) for r in pair["confirmation"]["rounds"]]
    assert ["suspect"] in second and ["mate"] in second
    assert cases["mate"]["verdict"]["rounds"] == second.count(["mate"])
