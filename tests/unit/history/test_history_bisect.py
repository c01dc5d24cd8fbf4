"""The bisect's search with a fake oracle: the first commit that moved in log2 steps, an
undecided step skipped, skips that leave several suspects said."""

from __future__ import annotations

from collections.abc import Callable, Collection

from pytest_mxperf.history.bisection import MOVED, SAME, UNDECIDED, StepResult, judge, search

COMMITS = [f"c{i}" for i in range(1, 8)]  # the seven commits after GOOD (c0); c7 is BAD


def _oracle(
    first_bad: int, undecided: Collection[str] = ()
) -> tuple[Callable[[str], StepResult], list[str]]:
    asked: list[str] = []

    def oracle(commit: str) -> StepResult:
        asked.append(commit)
        if commit in undecided:
            return StepResult(commit, UNDECIDED, "inconclusive")
        return StepResult(commit, MOVED if int(commit[1:]) >= first_bad else SAME, "")

    return oracle, asked


def test_every_first_bad_commit_is_found_in_three_steps() -> None:
    for first in range(1, 8):
        oracle, asked = _oracle(first)
        outcome = search(COMMITS, oracle)
        assert outcome.first == f"c{first}" and len(asked) <= 3


def test_an_undecided_step_is_skipped_and_the_search_goes_on() -> None:
    oracle, asked = _oracle(6, undecided={"c3"})
    outcome = search(COMMITS, oracle)
    assert asked[0] == "c3" and outcome.first == "c6"
    assert outcome.steps[0].verdict == UNDECIDED


def test_skips_that_leave_several_commits_name_them_all() -> None:
    oracle, _ = _oracle(4, undecided={"c4"})
    outcome = search(COMMITS, oracle)
    assert outcome.first is None and outcome.suspects == ("c4", "c5")
    assert [s.verdict for s in outcome.steps].count(UNDECIDED) == 1


def test_judge_reads_a_reports_verdicts() -> None:
    def report(*statuses: str) -> dict[str, object]:
        return {
            "cases": [
                {"key": f"k{i}", "verdict": {"status": s, "message": f"k{i}: {s}\nmore"}}
                for i, s in enumerate(statuses)
            ]
        }

    assert judge(report("pass", "regressed")) == (MOVED, "k1: regressed")
    assert judge(report("pass", "pass"))[0] == SAME
    assert judge(report("pass", "inconclusive")) == (UNDECIDED, "k1: inconclusive")
    assert judge({"cases": []})[0] == UNDECIDED
