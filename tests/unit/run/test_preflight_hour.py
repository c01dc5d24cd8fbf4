"""The hour a case is judged in: how much slower the machine runs now than when the figures it
is judged against were stored, from the probe and from the cases judged before it."""

from __future__ import annotations

import pytest

from pytest_mxperf.run.preflight import HOUR_CASES, Preflight


def test_the_cases_judged_before_tell_the_hour_from_the_second_on() -> None:
    pf = Preflight()
    assert HOUR_CASES == 2
    assert pf.hour("A", -0.04) is None  # nothing before it, no probe
    assert pf.hour("A", -0.02) is None  # one case could be the machine's treatment of it
    assert pf.hour("A", None) == pytest.approx(0.97)  # the median of -4% and -2%
    assert pf.hour("A", 0.10) == pytest.approx(0.97)  # the case with no change was not noted
    assert pf.hour("A", 0.0) == pytest.approx(0.98)  # median of -4%, -2%, +10%
    assert pf.hour("B", -0.05) is None  # another commit's figures: its own cases


def test_the_slower_of_the_probe_and_the_cases_is_taken() -> None:
    pf = Preflight(stored=100.0, now=95.0)
    assert pf.hour("A", -0.01) == pytest.approx(0.95)  # the probe alone
    pf.hour("A", -0.01)
    assert pf.hour("A", -0.2) == pytest.approx(0.95)  # the probe is slower than -1%
    pf.hour("A", -0.2)
    assert pf.hour("A", None) == pytest.approx(0.895)  # the median of -1%, -1%, -20%, -20%


def test_the_hour_explains_more_than_half_the_floor_once_pairs_cleared_the_drop() -> None:
    pf = Preflight()
    assert pf.explained("A", 0.05) == pytest.approx(0.025)  # nothing cleared yet
    pf.note_cleared("A", -0.08)
    assert pf.explained("A", 0.05) == pytest.approx(0.025)  # one case could be its own
    pf.note_cleared("A", -0.12)
    assert pf.explained("A", 0.05) == pytest.approx(0.10)  # the median of the two drops
    assert pf.explained("B", 0.05) == pytest.approx(0.025)  # another commit's figures
    pf.note_cleared("C", -0.01)
    pf.note_cleared("C", -0.015)
    assert pf.explained("C", 0.05) == pytest.approx(0.025)  # never less than half the floor
    pf.note_cleared("D", -0.5)
    pf.note_cleared("D", -0.6)
    assert pf.explained("D", 0.05) == pytest.approx(0.2)  # the probe's threshold bounds it


def test_the_summary_says_which_hour_explained_more_than_half_the_floor() -> None:
    pf = Preflight()
    for change in (-0.08, -0.12, -0.10):
        pf.hour("A", change)
    pf.note_cleared("A", -0.08)
    assert pf.describe_hour() == []  # one cleared case explains nothing yet
    pf.note_cleared("A", -0.12)
    assert pf.explained("A", 0.05) == pytest.approx(0.10)
    (line,) = pf.describe_hour()
    assert line == (
        "mxperf: a slower hour: the cases compared with the figures of A measured a median "
        "-10.0% against them, and 2 cases' own pairs found the code no slower (-8.0%, -12.0%): "
        "a passing case was paired only 2.5% or more below the hour"
    )
