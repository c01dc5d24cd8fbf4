"""``--mxperf-pair-budget``: the extra rounds of a paired run stop once the run has spent it,
and an undecided case left without its rounds says why."""

from __future__ import annotations

from typing import Callable

import pytest

from pytest_mxperf.testing.repos import head_speeds, read_report

# REV at 100 img/s; HEAD's processes at 96, 86, 94, ... img/s in turn: about 8% slower, too
# spread for 3 rounds to fail it, near enough that more rounds could.
SLOWER_SPEEDS = (96.0, 86.0, 94.0)
SLOWER_TEST = """
def test_slower(mxperf):
    mxperf.inference(FakeModel(SPEED), batch_size=8, model="slower")
"""


@pytest.mark.parametrize("budget", ["0.001", "600", "auto"])
def test_extra_rounds_stop_once_the_budget_is_spent(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], budget: str
) -> None:
    counter = fake_pytester.path.parent / f"{fake_pytester.path.name}.count"
    suite = head_speeds(SLOWER_SPEEDS, counter, fake_pytester.path) + SLOWER_TEST
    fake_pytester.makepyfile(test_suite=suite)
    commit("A")
    fake_pytester.makepyfile(test_suite=suite + "\n# B\n")
    commit("B")
    fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-max-rounds", "6",
        "--mxperf-pair-budget", budget, "--mxperf-json", "report.json",
    )  # fmt: skip
    report = read_report(fake_pytester.path)
    verdict = report["cases"][0]["verdict"]
    rounds = len(report["paired"]["rounds"])
    if budget != "0.001":  # the rounds it needs, within the cap (auto: 30 s at least)
        assert rounds > 2 and not report["paired"]["budget_spent"]
        assert "budget" not in verdict["message"]
    else:  # the first extra round spends it: the case stops there, and says so
        assert rounds == 3 and report["paired"]["budget_spent"]
        assert verdict["status"] == "inconclusive"
        assert "the run's --mxperf-pair-budget was spent" in verdict["message"]


def test_a_budget_must_be_positive_seconds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--mxperf", "--mxperf-pair-budget", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mxperf-pair-budget*must be > 0 seconds*, or auto*"])


def test_the_auto_budget_is_what_the_first_rounds_took_and_at_least_30_s() -> None:
    from pytest_mxperf.config import parsers
    from pytest_mxperf.paired.pairing import auto_budget

    assert parsers.budget_seconds("auto") is None and parsers.budget_seconds("90") == 90.0
    assert auto_budget(4.0) == 30.0  # a one-case repository keeps its extra rounds
    assert auto_budget(200.0) == 200.0  # a large joint pair: at most as much again
