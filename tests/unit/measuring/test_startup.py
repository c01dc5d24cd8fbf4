"""First step and warm-up figures: a large growth is flagged, small times are noise."""

from __future__ import annotations

import pytest

from pytest_mxperf.measuring.startup import startup_change


def test_first_step_three_times_slower_is_flagged() -> None:
    change = startup_change(0.40, 1.20, 2.0, 2.1)
    assert change.first_step.grew and not change.warmup.grew
    assert change.messages  # a figure grew
    assert change.messages == ["first step: 400 ms -> 1.20 s (3.0x)"]


def test_warmup_growth_is_flagged() -> None:
    change = startup_change(0.4, 0.4, 1.5, 4.0)
    assert change.messages == ["warm-up: 1.50 s -> 4.00 s (2.7x)"]


def test_tiny_times_are_noise() -> None:
    # 4 ms -> 30 ms is 7.5x, but 26 ms is under the 50 ms floor.
    assert not startup_change(0.004, 0.030, 0.010, 0.040).messages


def test_below_factor_is_not_flagged() -> None:
    assert not startup_change(1.0, 1.9, 3.0, 5.9).messages


def test_zero_baseline() -> None:
    change = startup_change(0.0, 0.2, 0.0, 0.0)
    assert change.first_step.grew and change.first_step.ratio is None
    assert change.messages == ["first step: 0 ms -> 200 ms"]


def test_faster_is_not_flagged() -> None:
    assert not startup_change(3.0, 0.5, 9.0, 1.0).messages


@pytest.mark.parametrize(("factor", "floor"), [(1.0, 0.05), (2.0, -1.0)])
def test_bad_arguments(factor: float, floor: float) -> None:
    with pytest.raises(ValueError):
        startup_change(1.0, 2.0, 1.0, 2.0, factor=factor, floor_s=floor)
