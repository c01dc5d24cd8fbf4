"""The calibration stored with baselines, and the joint pair of a run on a machine they do not
describe: one paired run measures every case, each judged from it ("machine" where the code is
not slower, "regressed" where it is)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from pytest_mxperf.baselines.calibration import PROBE
from pytest_mxperf.testing.repos import (
    PAIR_SUITE,
    inflate_baselines,
    read_report,
    stored_files,
    worktrees,
)

FAST, STEADY = "fast/inference/float32/bs8/cpu", "steady/inference/float32/bs8/cpu"
#: A regression's first paired run decides: no second run on fresh processes (two fork servers
#: and 3+ rounds fewer), where that second run is not what a test checks
#: (tests/plugin/test_pair_confirm.py's subject).
FIRST_DECIDES = ("--mxperf-pair-confirm", "off")


def test_an_update_stores_the_calibration_probe_with_the_baselines(
    fake_pytester: pytest.Pytester, store_baseline: Callable[..., str]
) -> None:
    store_baseline(PAIR_SUITE.format(speed=100.0))
    (path,) = stored_files(fake_pytester.path)
    calibration = json.loads(path.read_text())["calibration"]
    # The fake machine runs the probe at 1000 img/s (`FakeBackend.calibration`).
    assert calibration["probe"] == PROBE
    assert calibration["images_per_sec"] == pytest.approx(1000.0)
    assert calibration["runs"] == [pytest.approx(1000.0)]
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    assert json.loads(path.read_text())["calibration"]["runs"] == [pytest.approx(1000.0)] * 2


@pytest.fixture
def stored_faster(store_elsewhere: Callable[..., str]) -> str:
    return store_elsewhere(calibration=True)


def test_one_paired_run_judges_every_case_where_the_calibration_differs(
    fake_pytester: pytest.Pytester, stored_faster: str, commit: Callable[[str], str]
) -> None:
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    label = stored_faster[:10]
    result.stdout.fnmatch_lines(
        [
            f"*mxperf: the stored baselines (commit {label}) do not hold on this machine: it "
            "runs the calibration probe at 0.71x their machine's speed (beyond 1.25x); 2 "
            f"benchmark(s) are measured in one paired run of {label} and HEAD here*",
            "*mxperf verdicts: 2 machine*",
            "mxperf: calibration: this machine runs the calibration probe at 0.71x the speed it "
            "ran when the baselines were stored; 2 benchmark(s) were measured in one paired run "
            f"of the baseline commit {label} and HEAD on this machine and judged by it",
        ]
    )
    report = read_report(fake_pytester.path)
    assert report["calibration"]["factor"] == pytest.approx(1 / 1.4)
    assert report["calibration"]["paired_with"] == stored_faster
    # Both cases in every round of the one pair; their figures are HEAD's from it.
    rounds = report["joint_pair"]["rounds"]
    assert len(rounds) >= 2
    assert all(set(r["head"]["images_per_sec"]) == {FAST, STEADY} for r in rounds)
    cases = {c["key"]: c for c in report["cases"]}
    assert cases[FAST]["measurement"]["images_per_sec"] == pytest.approx(100.0)
    for key in (FAST, STEADY):
        verdict = cases[key]["verdict"]
        assert verdict["status"] == "machine"
        assert f"but on this machine HEAD vs baseline commit {label}: +0.0%" in verdict["message"]
    assert len(worktrees(fake_pytester.path)) == 1  # the pair's worktree is gone

    # A real regression on top of the other machine's figures is still caught by the pair.
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=80.0))
    commit("C: slower")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json", *FIRST_DECIDES)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*fast/inference/float32/bs8/cpu: 80.0 img/s vs baseline 140.0 img/s (-42.9%)*",
            "*confirmed by a paired run on this machine: HEAD vs baseline commit "
            f"{stored_faster[:10]}: -20.0%*",
        ]
    )
    report = read_report(fake_pytester.path)
    assert {c["key"]: c["verdict"]["status"] for c in report["cases"]} == {
        FAST: "regressed",
        STEADY: "machine",
    }
    assert report["calibration"]["cases_paired"] == 2


def test_a_calibration_within_the_threshold_keeps_the_plain_run(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> None:
    store_baseline(PAIR_SUITE.format(speed=100.0))
    inflate_baselines(fake_pytester.path, 1.1, calibration=True)
    commit("B: baselines 10% faster")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    report = read_report(fake_pytester.path)
    assert report["calibration"]["holds"] is True
    assert report["calibration"]["factor"] == pytest.approx(1 / 1.1)
    assert "joint_pair" not in report
    assert "calibration probe" not in result.stdout.str()


#: Four cases at 100 img/s (``slow`` at ``{slow}``), one test each, in file order.
FOUR_SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("name", ["a", "b", "c", "d"])
def test_case(mxperf, name):
    speed = {slow} if name == "a" else 100.0
    mxperf.inference(FakeModel(speed), batch_size=8, model=name)
"""


def _four_stored_elsewhere(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
    slow: float,
) -> str:
    """`FOUR_SUITE` stored at A (all at 100), the figures raised 40% but not the calibration
    (a machine that runs the probe as fast as this one and the models 1.4x faster), then
    ``a`` at ``slow`` img/s and a file beside them, committed as B; returns A's sha."""
    base = store_baseline(FOUR_SUITE.format(slow=100.0), passed=4)
    inflate_baselines(fake_pytester.path, 1.4, machine="0badc0ffee00", calibration=False)
    fake_pytester.makepyfile(test_suite=FOUR_SUITE.format(slow=slow))
    (fake_pytester.path / "NOTES.md").write_text("B\n")  # code changed: pairs run
    commit("B: baselines from a faster machine")
    return base


def test_two_cases_the_machine_explains_pair_the_rest_of_the_run_jointly(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> None:
    base = _four_stored_elsewhere(fake_pytester, commit, store_baseline, slow=100.0)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=4)
    label = base[:10]
    result.stdout.fnmatch_lines(
        [
            "*mxperf: 2 cases measured below their stored figures (-28.6%, -28.6%) and their "
            "own paired runs found the code no slower than the baseline commit "
            f"{label}'s: the machine, not the code; 2 benchmark(s) are measured in one paired "
            f"run of {label} and HEAD here, and judged by it",
            "*mxperf verdicts: 4 machine*",
            "mxperf: 2 benchmark(s) were measured in one paired run of the baseline commit "
            f"{label} and HEAD on this machine and judged by it, after 2 cases below their "
            "stored figures were found no slower by their own pairs",
        ]
    )
    assert "calibration probe at" not in result.stdout.str()  # the probe ran as fast here
    report = read_report(fake_pytester.path)
    assert report["calibration"]["holds"] is True
    assert report["calibration"]["paired_on_evidence"] == [
        {"commit": base, "changes": [pytest.approx(-2 / 7)] * 2}
    ]
    # c and d in every round of the joint pair, a and b in pairs of their own before it.
    rounds = report["joint_pair"]["rounds"]
    assert all(set(r["head"]["images_per_sec"]) == {"c/inference/float32/bs8/cpu",
                                                    "d/inference/float32/bs8/cpu"} for r in rounds)  # fmt: skip
    assert {c["key"][0]: c["verdict"]["status"] for c in report["cases"]} == dict.fromkeys(
        "abcd", "machine"
    )
    assert len(worktrees(fake_pytester.path)) == 1
    # Where the time went: every pair of the run (a's, b's, the joint one), each round's wall
    # and each case's seconds per side.
    runs = report["pair_runs"]
    assert len(runs) == 3
    assert runs[-1]["rounds"] == rounds
    for run in runs:
        assert len(run["round_seconds"]) == len(run["rounds"]) >= 2
        assert all(x > 0 for x in run["round_seconds"])
    blocks = [b for r in runs for rnd in r["rounds"] for b in rnd["head"]["blocks"].values()]
    assert blocks and all(
        b["warmup_seconds"] >= 0 and b["warmup_steady"] in (True, False) for b in blocks
    )
    measured = {k for r in runs for rnd in r["rounds"] for k in rnd["head"]["seconds"]}
    assert {k[0] for k in measured} == set("abcd")
    assert all(
        x is not None and x >= 0
        for r in runs
        for rnd in r["rounds"]
        for side in ("rev", "head")
        for x in rnd[side]["seconds"].values()
    )


#: Seven cases, one test each, in file order; ``a`` and ``b`` at ``{fast}`` img/s, the rest at 100.
SEVEN_SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("name", list("abcdefg"))
def test_case(mxperf, name):
    speed = {fast} if name in "ab" else 100.0
    mxperf.inference(FakeModel(speed), batch_size=8, model=name)
"""


def test_cases_off_their_figures_start_the_joint_pair_only_when_they_are_most_cases(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> None:
    # Stored at A, all at 100, the figures raised 40% (the probe not); at B, a and b measure
    # 140 (their figures hold), c..g 100 (off). Two cases off of four judged are no majority:
    # c, d and e get pairs of their own; the third off case of five starts the joint pair.
    base = store_baseline(SEVEN_SUITE.format(fast=100.0), passed=7)
    inflate_baselines(fake_pytester.path, 1.4, machine="0badc0ffee00", calibration=False)
    fake_pytester.makepyfile(test_suite=SEVEN_SUITE.format(fast=140.0))
    commit("B: a and b faster, the figures from a faster machine")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*mxperf: 3 cases measured below their stored figures*"])
    report = read_report(fake_pytester.path)
    assert report["calibration"]["paired_on_evidence"] == [
        {"commit": base, "changes": [pytest.approx(-2 / 7)] * 3}
    ]
    rounds = report["joint_pair"]["rounds"]
    assert all({k[0] for k in r["head"]["images_per_sec"]} == {"f", "g"} for r in rounds)
    statuses = {c["key"][0]: c["verdict"]["status"] for c in report["cases"]}
    assert statuses == {"a": "pass", "b": "pass", **dict.fromkeys("cdefg", "machine")}
    assert len(report["pair_runs"]) == 4  # c's, d's, e's, the joint one


def test_a_regression_is_no_evidence_that_the_machine_is_off(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> None:
    # a is really 20% slower: its pair confirms it, so only b counts, and c and d are
    # arbitrated one by one as before.
    _four_stored_elsewhere(fake_pytester, commit, store_baseline, slow=80.0)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json", *FIRST_DECIDES)
    result.assert_outcomes(passed=3, failed=1)
    assert "one paired run" not in result.stdout.str()
    report = read_report(fake_pytester.path)
    assert "joint_pair" not in report
    assert {c["key"][0]: c["verdict"]["status"] for c in report["cases"]} == {
        "a": "regressed",
        "b": "machine",
        "c": "machine",
        "d": "machine",
    }


#: HEAD's processes measure ``a`` at ``{first}`` img/s in turn from the ``{start}``th (the
#: controller's collection is the 0th: its side processes follow, one a round) and at
#: ``{later}`` in every other process (the controller's own measurement, the joint pair's); the
#: other cases at 100.
WOBBLY_PREFIX = """
import pathlib
import pytest
from pytest_mxperf.testing import FakeModel

HERE = pathlib.Path(__file__).resolve().parent
COUNTER = pathlib.Path({counter!r})
A = 100.0
if HERE == pathlib.Path({head!r}).resolve():
    n = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(n + 1))
    A = dict(enumerate({first}, {start})).get(n, {later})
"""
#: `FOUR_SUITE`'s tests with `WOBBLY_PREFIX`'s ``a``: its own pair's HEAD processes are 1-N.
WOBBLY_FIRST_SUITE = (
    WOBBLY_PREFIX
    + """
@pytest.mark.parametrize("name", ["a", "b", "c", "d"])
def test_case(mxperf, name):
    mxperf.inference(FakeModel(A if name == "a" else 100.0), batch_size=8, model=name)
"""
)


def _wobbly_first(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
    first: tuple[float, ...],
    later: float,
    *flags: str,
    suite: str = WOBBLY_FIRST_SUITE,
) -> pytest.RunResult:
    """`FOUR_SUITE` stored at A (all at 100 img/s) and raised 40%, then `WOBBLY_FIRST_SUITE`
    committed as B and run with at most ``len(first)`` rounds a pair (``a``'s own pair stops
    there, and the joint pair gives it no more than its first 2), and ``flags``."""
    _four_stored_elsewhere(fake_pytester, commit, store_baseline, slow=100.0)
    counter = fake_pytester.path.parent / f"{fake_pytester.path.name}.count"
    text = suite.format(
        counter=str(counter), head=str(fake_pytester.path), first=first, start=1, later=later
    )
    fake_pytester.makepyfile(test_suite=text)
    commit("C: a wobbles in its first HEAD processes")
    return fake_pytester.runpytest(
        "--mxperf", "--mxperf-max-rounds", str(len(first)), "--mxperf-json", "report.json",
        *flags,
    )  # fmt: skip


A_KEY = "a/inference/float32/bs8/cpu"


@pytest.mark.parametrize("strict", [False, True])
def test_the_joint_pair_judges_again_a_case_its_own_pair_left_inconclusive(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
    strict: bool,
) -> None:
    # a's own pair: 106, 94, 105 against 100 (about 5 rounds would decide; 3 allowed), so
    # inconclusive; b and c are the machine's, so d starts the joint pair, which measures a
    # again at 100 for its first 2 rounds: with a's own 3, they decide it. Under --mxperf-strict
    # the inconclusive case fails its test, and stays failed (d is left alone: its own pair).
    flags = ["--mxperf-strict"] if strict else []
    first = (106.0, 94.0, 105.0)
    result = _wobbly_first(fake_pytester, commit, store_baseline, first, 100.0, *flags)
    report = read_report(fake_pytester.path)
    cases = {c["key"][0]: c["verdict"] for c in report["cases"]}
    if strict:
        result.assert_outcomes(passed=3, failed=1)
        assert cases["a"]["status"] == "inconclusive" and cases["a"]["failed"]
        # Not kept for a joint pair: d alone was left, and paired on its own.
        assert "joint_pair" not in report and report["calibration"]["cases_paired"] == 0
        assert "judged again" not in result.stdout.str()
        return
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*: the machine, not the code; 2 benchmark(s) (1 of them again, left inconclusive "
            "by their own pairs) are measured in one paired run of * and HEAD here*",
            f"*mxperf: {A_KEY}: machine when judged again with the joint pair (3 round(s) of "
            "its own pair and 2 of the joint pair's)",
            "*mxperf verdicts: 4 machine*",
            "mxperf: 2 benchmark(s) were measured in one paired run of the baseline commit * "
            "after 2 cases below their stored figures were found no slower by their own pairs; "
            "1 case(s) their own pairs had left inconclusive were measured in it too and "
            "judged again (1 machine)",
        ]
    )
    assert {name: v["status"] for name, v in cases.items()} == dict.fromkeys("abcd", "machine")
    assert cases["a"]["rounds"] == 3 + len(report["joint_pair"]["rounds"]) == 5
    assert "3 round(s) of its own pair and 2" in cases["a"]["message"]
    assert cases["a"]["message"].count("106.0") == 1  # its own rounds are in its rounds' list
    earlier = report["joint_pair"]["earlier"][A_KEY]
    assert [r["head"]["images_per_sec"][A_KEY] for r in earlier] == pytest.approx(list(first))
    assert all(A_KEY in r["head"]["images_per_sec"] for r in report["joint_pair"]["rounds"])
    assert report["calibration"]["judged_again"] == {A_KEY: "machine"}
    assert report["errors"] == []


#: `WOBBLY_FIRST_SUITE` with a case ``a0`` (new: no stored figure) before ``a`` in its test.
WOBBLY_SECOND_SUITE = (
    WOBBLY_PREFIX
    + """
@pytest.mark.parametrize("name", ["a", "b", "c", "d"])
def test_case(mxperf, name):
    if name == "a":
        mxperf.inference(FakeModel(100.0), batch_size=8, model="a0")
    mxperf.inference(FakeModel(A if name == "a" else 100.0), batch_size=8, model=name)
"""
)


def test_cases_judged_already_are_handed_to_the_joint_pairs_sides(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> None:
    """The joint pair measures ``a`` again (its own pair left it inconclusive), not ``a0``, the
    case of its test judged before it: the sides get ``a0``'s result back from this process, as
    ``a``'s own pair did."""
    first = (106.0, 94.0, 105.0)
    suite = WOBBLY_SECOND_SUITE
    result = _wobbly_first(fake_pytester, commit, store_baseline, first, 100.0, suite=suite)
    result.assert_outcomes(passed=4)
    report = read_report(fake_pytester.path)
    cases = {c["model"]: c["verdict"]["status"] for c in report["cases"]}
    assert cases == {"a0": "new", **dict.fromkeys("abcd", "machine")}
    joint = report["joint_pair"]["rounds"]
    assert len(joint) >= 2 and all(A_KEY in r["head"]["images_per_sec"] for r in joint)
    measured = {
        k.split("/")[0]
        for run in report["pair_runs"]
        for r in run["rounds"]
        for side in ("rev", "head")
        for k in r[side]["images_per_sec"]
    }
    assert measured == set("abcd")  # a0: never timed by a side


def test_a_regression_the_joint_pair_finds_in_an_earlier_case_fails_the_run(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> None:
    # a is 12% slower; its own pair saw 93, 84, 92 (undecided in the 3 rounds allowed). The
    # joint pair measures it at 88 for 2 rounds: with its own 3, certain (its second run, on
    # fresh processes and without the earlier rounds, agrees). Its test had passed as
    # inconclusive, so the run fails at the end, naming it. Neither pair alone would have
    # failed it: 2 rounds cannot (`test_paired_mode`), and the own pair's 3 did not.
    first = (93.0, 84.0, 92.0)
    result = _wobbly_first(fake_pytester, commit, store_baseline, first, 88.0)
    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*mxperf: 1 error(s)*",
            f"{A_KEY}: regressed: the run's joint pair measured it again after its own pair had "
            "left it inconclusive (3 round(s) of its own pair and 2 of the joint pair's); its "
            "test test_suite.py::test_case[[]a[]] had passed; the verdict is in the results "
            "table and the JSON report",
        ]
    )
    report = read_report(fake_pytester.path)
    verdict = next(c["verdict"] for c in report["cases"] if c["key"][0] == "a")
    assert verdict["status"] == "regressed" and verdict["failed"]
    assert report["calibration"]["judged_again"] == {A_KEY: "regressed"}
    earlier = report["joint_pair"]["earlier"][A_KEY]
    assert [r["head"]["images_per_sec"][A_KEY] for r in earlier] == pytest.approx(list(first))
    assert len(report["joint_pair"]["rounds"]) == 2  # 3 + 2: the cap counts its own rounds
    assert len(report["joint_pair"]["confirmation"]["rounds"]) >= 2


#: One test before a test of four cases, ``a`` wobbling in its own pair's rounds.
ONE_TEST_SUITE = (
    WOBBLY_PREFIX
    + """
def test_first(mxperf):
    mxperf.inference(FakeModel(100.0), batch_size=8, model="z")

def test_all(mxperf):
    for name in "abcd":
        mxperf.inference(FakeModel(A if name == "a" else 100.0), batch_size=8, model=name)
"""
)


def test_an_inconclusive_case_of_the_test_that_would_start_the_joint_pair_is_kept_once(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> None:
    # z's own pair is the machine's; test_all's own pair (HEAD's processes 3-5) measures all
    # its cases: a inconclusive (its rounds swing more than the other cases' round effect
    # allows), b the machine's (the second case). The rest of the run is
    # test_all itself, whose pair has run: no joint pair, and a is kept once, inconclusive.
    counter = fake_pytester.path.parent / f"{fake_pytester.path.name}.count"
    fill = {"counter": str(counter), "head": str(fake_pytester.path), "start": 3}
    store_baseline(ONE_TEST_SUITE.format(first=(), later=100.0, **fill), passed=2)
    counter.unlink()
    inflate_baselines(fake_pytester.path, 1.4, machine="0badc0ffee00", calibration=False)
    first = (115.0, 88.0, 112.0)
    fake_pytester.makepyfile(test_suite=ONE_TEST_SUITE.format(first=first, later=100.0, **fill))
    commit("B: a wobbles in its own pair")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-max-rounds", "3", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=2)
    report = read_report(fake_pytester.path)
    assert report["errors"] == []
    statuses = [(c["key"][0], c["verdict"]["status"]) for c in report["cases"]]
    assert sorted(statuses) == [
        ("a", "inconclusive"), ("b", "machine"), ("c", "machine"), ("d", "machine"),
        ("z", "machine"),
    ]  # fmt: skip
    assert "joint_pair" not in report


@pytest.mark.parametrize("probe_slower", [False, True])
def test_a_slower_hour_the_probe_measures_needs_no_pair(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
    probe_slower: bool,
) -> None:
    # Both cases 3.8% below their stored figures, code changed since: beyond half the 5% floor,
    # so a pair looks at them, unless the probe runs as much slower now (a slower hour).
    store_baseline(PAIR_SUITE.format(speed=100.0))
    inflate_baselines(fake_pytester.path, 1.04, calibration=probe_slower)
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0) + "\n# changed\n")
    commit("B: a code change since the baselines")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    report = read_report(fake_pytester.path)
    assert report["calibration"]["factor"] == pytest.approx(1 / 1.04 if probe_slower else 1.0)
    paired = {k for r in report.get("pair_runs", []) for k in r["rounds"][0]["head"]["seconds"]}
    assert paired == (set() if probe_slower else {FAST, STEADY})
    assert {c["verdict"]["status"] for c in report["cases"]} == {"pass"}
    if probe_slower:
        # A real loss on top of that hour is still paired, and fails.
        fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=90.0))
        commit("C: fast is 10% slower")
        result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json", *FIRST_DECIDES)
        result.assert_outcomes(passed=1, failed=1)
        report = read_report(fake_pytester.path)
        assert {c["key"]: c["verdict"]["status"] for c in report["cases"]} == {
            FAST: "regressed",
            STEADY: "pass",
        }


#: Five cases, one test each, in file order; ``e`` at ``{e}`` img/s, the rest at 100.
FIVE_SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("name", list("abcde"))
def test_case(mxperf, name):
    mxperf.inference(FakeModel({e} if name == "e" else 100.0), batch_size=8, model=name)
"""


def widen_stored_runs(path: Path, spread: float) -> None:
    """Give every stored case three runs ``spread`` apart either way of its figure, as three
    updates on a noisy VM store them (its threshold then twice the half-range: 2 x spread)."""
    for file in (path / "baselines").rglob("*.json"):
        data = json.loads(file.read_text())
        for case in data["cases"].values():
            figure = case["images_per_sec"]
            case["runs"] = [figure * (1 - spread), figure, figure * (1 + spread)]
            case["machine_ids"] = case["machine_ids"][-1:] * 3
        file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def paired_cases(report: dict[str, object]) -> list[set[str]]:
    runs = report["pair_runs"]
    assert isinstance(runs, list)
    return [{k[0] for k in r["rounds"][0]["head"]["seconds"]} for r in runs]


def test_a_slower_hour_the_probe_misses_is_told_by_the_cases_and_their_pairs(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> None:
    # Every case 8.3% below its stored figure: beyond the 5% floor, within its 30% threshold
    # (noisy stored runs), the probe as fast as when stored: the hour is the models', not the
    # probe's. The first two cases are paired (nothing tells the hour yet) and their pairs find
    # the code no slower; from the third on, the cases judged before tell the hour (their
    # median), and the pairs that cleared them say it explains 8.3%, so the other three are
    # not paired (were the discount capped at half the floor, all five would be); two passes
    # their pairs confirmed are no evidence that the figures do not hold here: no joint pair.
    store_baseline(FIVE_SUITE.format(e=100.0), passed=5)
    widen_stored_runs(fake_pytester.path, 0.15)
    inflate_baselines(fake_pytester.path, 1.09)
    fake_pytester.makepyfile(test_suite=FIVE_SUITE.format(e=100.0) + "\n# changed\n")
    commit("B: a code change since the baselines")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=5)
    report = read_report(fake_pytester.path)
    assert report["calibration"]["factor"] == pytest.approx(1.0)
    assert paired_cases(report) == [{"a"}, {"b"}]
    assert "joint_pair" not in report
    changes = {c["key"][0]: c["verdict"]["change"] for c in report["cases"]}
    assert changes == dict.fromkeys("abcde", pytest.approx(1 / 1.09 - 1, abs=0.01))
    assert {c["verdict"]["status"] for c in report["cases"]} == {"pass"}
    result.stdout.re_match_lines(
        [
            r"mxperf: a slower hour: the cases compared with the figures of \w{10} measured a "
            r"median -8\.\d% against them, and 2 cases' own pairs found the code no slower "
            r"\(-8\.\d%, -8\.\d%\): a passing case was paired only 2\.5% or more below the hour"
        ]
    )
    # A real loss on top of that hour, still within the noisy threshold: beyond the hour by
    # more than half the floor, so paired, and it fails.
    fake_pytester.makepyfile(test_suite=FIVE_SUITE.format(e=90.0))
    commit("C: e is 10% slower")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json", *FIRST_DECIDES)
    result.assert_outcomes(passed=4, failed=1)
    report = read_report(fake_pytester.path)
    assert paired_cases(report) == [{"a"}, {"b"}, {"e"}]
    cases = {c["key"][0]: c["verdict"] for c in report["cases"]}
    assert cases["e"]["change"] > -0.3  # within its stored threshold: the pair failed it
    assert {k: v["status"] for k, v in cases.items()} == {
        **dict.fromkeys("abcd", "pass"),
        "e": "regressed",
    }
