"""Progress lines: elapsed and expected time on an injected clock."""

from __future__ import annotations

from pytest_mxperf.reporting.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_no_estimate_before_the_first_step() -> None:
    clock = Clock()
    meter = Progress(4, clock)
    clock.now += 5
    assert meter.remaining is None
    assert meter.describe() == "0/4, elapsed 5 s"


def test_estimate_from_the_pace_so_far() -> None:
    clock = Clock()
    meter = Progress(4, clock)
    clock.now += 30
    meter.advance()
    assert meter.remaining == 90.0
    assert meter.describe() == "1/4, elapsed 30 s, about 1 min 30 s left"
    for _ in range(3):
        meter.advance()
    assert meter.remaining is None  # all done


def test_unknown_total_shows_count_and_elapsed() -> None:
    clock = Clock()
    meter = Progress(None, clock)
    meter.advance()
    clock.now += 3725
    assert meter.describe() == "1, elapsed 1 h 2 min"
