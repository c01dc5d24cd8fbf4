"""The summary says once when the stored figures do not describe this machine, and by about
what factor (issue 28: a new host says "machine" once, not per case)."""

from __future__ import annotations

import pytest

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.records import CaseResult, Outcome, Verdict
from pytest_mxperf.reporting.report_sections import machine_factor, machine_lines


def case(
    model: str, rate: float, stored: float | None, outcome: Outcome = Outcome.PASS
) -> CaseResult:
    m = Measurement(8, 10, (80 / rate,) * 3, 5, 0.1, True, 0.01, 0.0)
    verdict = Verdict(outcome, False, baseline_images_per_sec=stored)
    key = CaseKey(model, "inference", "float32", 8, "cpu")
    return CaseResult(key, "cpu(0)", "cpu-x-2c", measurement=m, verdict=verdict)


def test_a_machine_a_third_slower_is_named_once_with_its_factor() -> None:
    results = [case(f"m{i}", 60.0 + i, 100.0) for i in range(14)]
    results.append(case("m14", 70.0, 100.0, Outcome.MACHINE))
    factor = machine_factor(results)
    assert factor is not None
    mid, low, high, n = factor
    assert (round(mid, 2), round(low, 2), round(high, 2), n) == (0.67, 0.6, 0.73, 15)
    (line,) = machine_lines(results)
    assert line.startswith("mxperf: the stored figures do not hold on this machine: it measures")
    assert "about 0.67x (median of 15 cases, 0.60x .. 0.73x)" in line
    assert "1 case(s) that looked slower are no slower than the baseline commit's code" in line


@pytest.mark.parametrize(
    "rates",
    [
        [95.0, 102.0, 99.0, 104.0],  # within the factor: the figures hold
        [80.0, 82.0],  # too few cases to say anything of the machine
        [70.0, 72.0, 130.0, 135.0, 71.0],  # cases disagree: code changes, not a machine
    ],
)
def test_figures_that_describe_this_machine_say_nothing(rates: list[float]) -> None:
    results = [case(f"m{i}", r, 100.0) for i, r in enumerate(rates)]
    assert machine_factor(results) is None
    assert machine_lines(results) == []


def test_cases_without_a_stored_figure_do_not_count() -> None:
    results = [case(f"m{i}", 50.0, None) for i in range(5)] + [case("x", 50.0, 100.0)]
    assert machine_factor(results) is None


def test_machine_verdicts_without_a_factor_keep_their_own_line() -> None:
    results = [case("a", 100.0, 140.0, Outcome.MACHINE), case("b", 100.0, 140.0, Outcome.MACHINE)]
    (line,) = machine_lines(results)
    assert line.startswith("mxperf: 2 case(s) below their stored figures are no slower than the")
