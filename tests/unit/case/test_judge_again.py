"""A case judged again once the run's joint pair has measured it after its own pair left it
inconclusive (`pytest_mxperf.case.jointpair._judge_again`), without processes: the collected
result takes the new verdict, a regression found that way is a run error naming the test, and a
failure to judge again keeps the first verdict."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Callable, cast

from pytest_mxperf.case import jointpair
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.records import CaseResult, Outcome, Verdict
from pytest_mxperf.measuring.verdicts import Finding
from pytest_mxperf.paired import pairdata
from pytest_mxperf.run.collected import Collected
from pytest_mxperf.run.preflight import Preflight, Undecided
from pytest_mxperf.testing import measurement_of

if TYPE_CHECKING:
    from pytest_mxperf.case.path import CaseBench

KEY = CaseKey.parse("m/inference/float32/bs1/cpu")
NODEID = "test_a.py::test_m"


def judged(
    outcome: Outcome, failed: bool = False, rate: float = 100.0, note: Finding | None = None
) -> CaseResult:
    """A judged case; with the ``note`` its judgement again is given, last in its message."""
    verdict = Verdict(outcome, failed).explained(f"{KEY}: {outcome.value}")
    if note is not None:
        verdict = verdict.adding(note.text)
    measured = measurement_of(rate, 0.01)
    return CaseResult(KEY, "cpu(0)", "hw", measurement=measured, nodeid=NODEID, verdict=verdict)


def joint(own: int, more: int) -> tuple[pairdata.PairedData, list[tuple[CaseResult, CaseResult]]]:
    """A joint pair with ``more`` rounds of the case, after ``own`` rounds of its own pair."""
    rounds = [(judged(Outcome.NEW), judged(Outcome.NEW)) for _ in range(own)]
    data = pairdata.PairedData("main", "a" * 40, earlier={KEY: rounds})
    for _ in range(more):
        data.rounds.append(
            {
                pairdata.REV: pairdata.SideResult({KEY: judged(Outcome.NEW)}),
                pairdata.HEAD: pairdata.SideResult({KEY: judged(Outcome.NEW)}),
            }
        )
    return data, rounds


def run(again: Callable[[Finding], CaseResult]) -> tuple[SimpleNamespace, list[str]]:
    """`_judge_again` of the case (collected as inconclusive) with ``again``: the session
    afterwards, and what was said on the terminal."""
    told: list[str] = []
    session = SimpleNamespace(collected=Collected(), preflight=Preflight(), errors=[])
    session.collected.results.append(judged(Outcome.INCONCLUSIVE))
    bench = cast("CaseBench", SimpleNamespace(session=session, tell=told.append))
    data, rounds = joint(3, 4)
    case = Undecided("a" * 40, NODEID, KEY, rounds, again)
    jointpair._judge_again(bench, case, data)
    return session, told


def test_the_collected_result_takes_the_new_verdict() -> None:
    session, told = run(lambda note: judged(Outcome.MACHINE, note=note))
    (kept,) = session.collected.results
    assert kept.verdict is not None and kept.verdict.outcome == Outcome.MACHINE
    said = "3 round(s) of its own pair and 4 of the joint pair's"
    assert said in kept.verdict.message
    assert told == [f"mxperf: {KEY}: machine when judged again with the joint pair ({said})"]
    assert session.preflight.judged_again == {KEY: "machine"}
    assert session.errors == []


def test_a_regression_found_again_is_a_run_error_naming_the_test() -> None:
    session, _ = run(lambda note: judged(Outcome.REGRESSED, failed=True, rate=90.0, note=note))
    (kept,) = session.collected.results
    assert kept.verdict is not None and kept.verdict.outcome == Outcome.REGRESSED
    (error,) = session.errors
    assert error.startswith(f"{KEY}: regressed: the run's joint pair measured it again")
    assert f"its test {NODEID} had passed" in error


def test_a_case_that_cannot_be_judged_again_keeps_its_first_verdict() -> None:
    def broken(note: Finding) -> CaseResult:
        raise RuntimeError("boom")

    session, told = run(broken)
    (kept,) = session.collected.results
    assert kept.verdict is not None and kept.verdict.outcome == Outcome.INCONCLUSIVE
    assert told == [f"mxperf: {KEY}: not judged again (RuntimeError: boom)"]
    assert session.preflight.judged_again == {} and session.errors == []
