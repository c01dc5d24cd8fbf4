"""Paired mode (``--mxperf-ab``): verdicts of the pair, a revision that cannot be measured and
the rounds an undecided case gets (Ctrl-C in the middle of a round: test_paired_interrupts)."""

from __future__ import annotations

import re
from typing import Callable

import pytest

from pytest_mxperf.testing.repos import (
    PAIR_SUITE,
    commit_two,
    head_speeds,
    read_report,
    worktrees,
)


def test_paired_run_fails_only_the_slower_case(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=80.0))
    commit("slower")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*mxperf: paired run vs HEAD~1: round 1, rev (HEAD~1); sides 0/4, elapsed *",
            "*mxperf: paired run vs HEAD~1: round 2, head (HEAD); sides 2/4, elapsed *, about * left",
            # Found regressed, then paired again on fresh processes, which decide.
            "*paired run vs HEAD~1: second run, round 1, rev (HEAD~1); sides 6, *",
            "*fast/inference/float32/bs8/cpu: HEAD vs HEAD~1: -20.0% (99% interval -2*% .. -1*%, "
            "3 round(s)), measured again on fresh processes after a first paired run found "
            "-20.0% (99% interval -2*% .. -1*%, 3 round(s)): slower, and a drop of 5% or more "
            "is not ruled out*",
            "*img/s per round (HEAD~1/HEAD): 100.0/80.0, 100.0/80.0, 100.0/80.0; second run: "
            "100.0/80.0, 100.0/80.0, 100.0/80.0",
        ]
    )
    cases = {c["key"]: c for c in read_report(fake_pytester.path)["cases"]}
    fast = cases["fast/inference/float32/bs8/cpu"]
    assert fast["verdict"]["status"] == "regressed"
    assert fast["verdict"]["baseline_images_per_sec"] == pytest.approx(100.0)
    assert fast["measurement"]["images_per_sec"] == pytest.approx(80.0)
    assert cases["steady/inference/float32/bs8/cpu"]["verdict"]["status"] == "pass"
    rounds = read_report(fake_pytester.path)["paired"]["rounds"]
    assert len(rounds) == 3 and set(rounds[0]) == {"rev", "head"}
    # The second run measured only the case the first found regressed.
    again = read_report(fake_pytester.path)["paired"]["confirmation"]["rounds"]
    assert len(again) == 3
    assert [list(r["head"]["images_per_sec"]) for r in again] == [[fast["key"]]] * 3
    # Only the slower case is profiled: one more process per side, after the rounds.
    (profiled,) = read_report(fake_pytester.path)["paired"]["profile_rounds"]
    assert {side: list(r["images_per_sec"]) for side, r in profiled.items()} == {
        "rev": ["fast/inference/float32/bs8/cpu"],
        "head": ["fast/inference/float32/bs8/cpu"],
    }
    result.stdout.fnmatch_lines(
        [
            "*paired run vs HEAD~1: profile, head (HEAD); sides 12, *",
            "*paired run vs HEAD~1: profile, rev (HEAD~1); sides 13, *",
        ]
    )
    assert fast["baseline_profile"] is not None and fast["profile"] is not None
    assert cases["steady/inference/float32/bs8/cpu"]["baseline_profile"] is None
    assert len(worktrees(fake_pytester.path)) == 1  # REV's worktree is gone
    assert not (fake_pytester.path / "baselines").exists()


def test_paired_run_case_missing_at_rev_and_rev_failing_to_import(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_other="import no_such_module\n")
    commit("broken file at REV")
    fake_pytester.makepyfile(
        test_suite=PAIR_SUITE.format(speed=100.0),
        test_other="""
            from pytest_mxperf.testing import FakeModel
            def test_other(mxperf):
                mxperf.inference(FakeModel(10.0), batch_size=1, model="other")
        """,
    )
    commit("HEAD")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    # REV's trouble is not HEAD's: those cases are "new", with the reason, and the run goes on.
    result.assert_outcomes(passed=3)
    verdicts = {c["model"]: c["verdict"] for c in read_report(fake_pytester.path)["cases"]}
    assert {m: v["status"] for m, v in verdicts.items()} == {
        "fast": "new",
        "other": "new",
        "steady": "new",
    }
    assert verdicts["fast"]["message"] == (
        "fast/inference/float32/bs8/cpu: not measured at HEAD~1 (the case does not exist there)"
    )
    other = verdicts["other"]["message"]
    assert other.startswith("other/inference/float32/bs1/cpu: HEAD~1's side could not measure")
    assert "test_other.py: " in other and "no_such_module" in other
    assert "test_suite" not in other


def test_paired_run_refuses_unknown_revision_and_xdist(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    bad = fake_pytester.runpytest("--mxperf", "--mxperf-ab", "no-such-rev")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--mxperf-ab: unknown revision 'no-such-rev'*"])
    both = fake_pytester.runpytest("--mxperf", "--mxperf-ab", "HEAD", "--mxperf-update")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    # An option's existing path outside the repository becomes pytest's rootdir: named.
    outside = fake_pytester.path.parent / f"{fake_pytester.path.name}-elsewhere"
    outside.mkdir()
    (outside / "r.json").write_text("{}")
    moved = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD", "--mxperf-json", str(outside / "r.json")
    )
    assert moved.ret == pytest.ExitCode.USAGE_ERROR
    moved.stderr.fnmatch_lines(
        [
            # (the common ancestor of the repository and that path)
            f"*--mxperf-ab HEAD: no git repository at pytest's rootdir {outside.parent} (pytest "
            "picks it from the paths on the command line, option values included: write options "
            "as --mxperf-json=PATH, or give --rootdir)*"
        ]
    )


# REV runs at 100 img/s; HEAD's processes (the controller's collection included) at 115, 88,
# 112, ... img/s in turn: no slower on average, too spread for 5 rounds to rule out a 5% loss.
WOBBLY_SPEEDS = (115.0, 88.0, 112.0)
WOBBLY_TEST = """
def test_wobbly(mxperf):
    mxperf.inference(FakeModel(SPEED), batch_size=8, model="wobbly")
"""


@pytest.mark.parametrize("strict", [False, True])
def test_an_undecided_case_no_round_in_reach_would_decide_gets_none_unless_strict(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], strict: bool
) -> None:
    counter = fake_pytester.path.parent / f"{fake_pytester.path.name}.count"
    suite = head_speeds(WOBBLY_SPEEDS, counter, fake_pytester.path) + WOBBLY_TEST
    commit_two(fake_pytester, suite)
    flags = ["--mxperf-strict"] if strict else []
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-max-rounds", "5", "--mxperf-json",
        "report.json", *flags,
    )  # fmt: skip
    report = read_report(fake_pytester.path)
    verdict = report["cases"][0]["verdict"]
    assert verdict["status"] == "inconclusive" and verdict["change"] > 0
    assert report["paired"]["profile_rounds"] == []  # nothing slower to profile
    summary = "mxperf: 1 case(s) inconclusive: their paired rounds could not decide either way"
    effect = "they fail (--mxperf-strict)" if strict else "they pass (--mxperf-strict fails them)"
    result.stdout.fnmatch_lines([f"{summary}*; {effect}; *: wobbly/inference/*"])
    if strict:  # inconclusive fails here: every round up to the cap is worth running
        result.assert_outcomes(failed=1)
        assert len(report["paired"]["rounds"]) == 5 and verdict["rounds"] == 5
        assert "inconclusive, no slower on average" in verdict["message"]
    else:  # not slower, and more rounds than the cap of 5 would decide it: none beyond the
        # third (two rounds' spread is too unsure to give up on)
        result.assert_outcomes(passed=1)
        assert len(report["paired"]["rounds"]) == 3 and verdict["rounds"] == 3
        first = verdict["message"].splitlines()[0]
        suggested = re.search(r": inconclusive, no slower on average; about (\d+) rounds", first)
        assert suggested and int(suggested[1]) > 5
        assert first.endswith(f" would decide (--mxperf-max-rounds {suggested[1]})")
