"""A history's pairs only measure the ratio: ``--mxperf-pair-confirm off`` and
``--mxperf-pair-profile off`` (as `mxperf history` jobs run them) leave no second run and no
profile round, and the verdict's JSON records its interval's level, which the entry reads."""

from __future__ import annotations

from typing import Callable

import pytest

from pytest_mxperf.history import entries
from pytest_mxperf.testing.repos import PAIR_SUITE, read_report

SLOW = "fast/inference/float32/bs8/cpu"


def test_a_history_pair_runs_no_second_run_and_no_profile_round(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=80.0))
    commit("slower")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json",
        "--mxperf-pair-confirm", "off", "--mxperf-pair-profile", "off",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "second run" not in out and "profile," not in out
    report = read_report(fake_pytester.path)
    assert report["paired"]["confirmation"] is None
    assert report["paired"]["profile_rounds"] == []
    cases = {c["key"]: c for c in report["cases"]}
    slow, steady = cases[SLOW]["verdict"], cases["steady/inference/float32/bs8/cpu"]["verdict"]
    assert slow["status"] == "regressed" and slow["interval_level"] == 0.99
    assert steady["status"] == "pass" and steady["interval_level"] in (0.90, 0.95)
    assert cases[SLOW]["profile"] is None  # nothing was profiled
    found = {e.case: e for e in entries.from_report(report)}
    assert found[SLOW].level == 0.99 and found[SLOW].ratio == pytest.approx(0.8)
    assert found["steady/inference/float32/bs8/cpu"].level == steady["interval_level"]
    # ... and the df of its t quantile: a regression's 99% interval takes the rounds less one.
    assert slow["interval_df"] == slow["rounds"] - 1 == found[SLOW].df
    assert isinstance(steady["interval_df"], int) and steady["interval_df"] >= 1
    assert found["steady/inference/float32/bs8/cpu"].df == steady["interval_df"]
