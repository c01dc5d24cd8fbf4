"""The timing engine, driven by a fake clock: every number here is exact (warm-up, block size,
when to stop, errors; the record: test_measurement_record.py; paired sides and turns:
test_measure_sides.py).

Durations are powers of two so float arithmetic on the fake clock never rounds.
"""

from __future__ import annotations

import math

import pytest
from fake_clock import BLOCK, STEP, FakeClock, run

from pytest_mxperf.measuring.stats import rel_iqr


def test_constant_step_gives_exact_rate() -> None:
    fake = FakeClock()
    m = run(fake, items=8)
    assert m.items_per_sec == 8 / STEP == 512.0
    assert m.steps_per_block == 16  # 0.25 s / (1/64 s)
    assert m.block_seconds == (BLOCK,) * len(m.block_seconds)
    assert m.block_rates == [512.0] * len(m.block_seconds)
    assert m.rel_iqr == 0.0
    assert m.iqr == 0.0
    assert m.warmup_steady is True
    assert m.sync_seconds == 0.0
    assert m.items_per_step == 8


def test_first_step_is_timed_apart_and_excluded() -> None:
    def durations(fake: FakeClock) -> float:
        return 3.0 if fake.steps == 0 else STEP

    fake = FakeClock(durations)
    m = run(fake)
    assert m.first_step_seconds == 3.0
    assert m.items_per_sec == 512.0  # the slow first step is in no block
    assert max(m.block_seconds) == BLOCK
    assert m.warmup_seconds >= 3.0  # reported as part of the warm-up
    assert m.warmup_steady is True


def test_warmup_waits_until_two_windows_agree() -> None:
    # Steps start 9x slow and settle geometrically (caches, autotune) towards STEP.
    def durations(fake: FakeClock) -> float:
        return float(STEP * (1 + 8 * 0.5 ** (fake.steps / 4)))

    fake = FakeClock(durations)
    m = run(fake, warmup_min_time=0.0)
    assert m.warmup_steady is True
    # It did not stop while consecutive windows still differed by more than 5%...
    assert m.warmup_steps > 30
    assert fake.step_log[20] > 1.2 * STEP
    # ... and it stopped once they agreed: well before the 10 s warm-up budget.
    assert m.warmup_seconds < 2.0
    # The warm-up steps are exactly those before the first timed block.
    assert m.warmup_steps == fake.steps - m.steps_per_block * len(m.block_seconds)
    timed = fake.step_log[m.warmup_steps :]
    assert max(timed) < 1.01 * STEP
    assert m.items_per_sec == pytest.approx(512.0, rel=0.01)


def test_warmup_runs_at_least_warmup_min_time() -> None:
    fake = FakeClock()  # steady from the first window
    m = run(fake, warmup_min_time=1.5)
    assert m.warmup_steady is True
    assert m.warmup_seconds - m.first_step_seconds >= 1.5
    assert m.warmup_seconds - m.first_step_seconds < 1.5 + BLOCK


def test_warmup_min_time_is_capped_by_warmup_time() -> None:
    fake = FakeClock()
    m = run(fake, warmup_min_time=5.0, warmup_time=0.5)
    assert m.warmup_seconds - m.first_step_seconds < 0.5 + BLOCK
    assert m.warmup_steady is True


def test_warmup_gives_up_at_warmup_time_when_never_steady() -> None:
    # Every window is 20% slower per step than the one before: never within 5%.
    def durations(fake: FakeClock) -> float:
        return STEP * 1.2**fake.syncs

    fake = FakeClock(durations)
    m = run(fake, warmup_time=2.0, min_time=0.5, max_time=1.0, min_blocks=2)
    assert m.warmup_steady is False
    assert m.warmup_seconds >= 2.0
    # It gave up soon after warmup_time: the last window is about block_time / 2.
    assert m.warmup_seconds < 2.0 + 4 * BLOCK
    assert len(m.block_seconds) >= 2


def test_steady_warmup_needs_warmup_min_steps() -> None:
    # A step so slow that one warm-up window is a single step.
    fake = FakeClock(1.0)
    m = run(fake, warmup_min_steps=4, min_blocks=1, min_time=1.0, max_time=1.0)
    assert m.warmup_steady is True
    assert m.warmup_steps == 4  # first step + three one-step windows (two agreeing ones are 1+2)


def test_block_lasts_at_least_block_time() -> None:
    fake = FakeClock(0.03)  # 0.25 / 0.03 is not a whole number of steps
    m = run(fake)
    assert m.steps_per_block == math.ceil(BLOCK / 0.03 - 1e-9)
    assert all(s >= BLOCK for s in m.block_seconds)
    assert all(s < BLOCK + 0.03 + 1e-9 for s in m.block_seconds)


def test_block_grows_so_sync_costs_at_most_one_percent() -> None:
    sync = 2.0**-7  # 1/128 s: 100x is 0.78 s, longer than block_time
    fake = FakeClock(STEP, sync_seconds=sync)
    m = run(fake)
    assert m.sync_seconds == sync
    for seconds in m.block_seconds:
        assert seconds >= sync / 0.01, (seconds, m.steps_per_block)
        assert sync / seconds <= 0.01
    # ... but not much longer than needed.
    assert m.steps_per_block * STEP < sync / 0.01 + 4 * STEP
    # The rate counts the sync inside each block (it is part of the real cost).
    assert m.items_per_sec == pytest.approx(
        8 * m.steps_per_block / (m.steps_per_block * STEP + sync)
    )


def test_expensive_sync_is_measured_as_the_cheapest_idle_sync() -> None:
    fake = FakeClock(STEP, sync_seconds=0.001)
    m = run(fake)
    assert m.sync_seconds == pytest.approx(0.001)
    # sync cost 0.001 s only asks for 0.1 s blocks: block_time (0.25 s) wins.
    assert m.steps_per_block == 16


def test_every_block_ends_in_one_sync() -> None:
    fake = FakeClock()
    m = run(fake)
    windows = (m.warmup_steps - 1) // 8  # constant 1/64 s steps: 8-step warm-up windows
    assert m.warmup_steps == 1 + 8 * windows
    # first step + one per warm-up window + 5 idle syncs + one per block
    assert fake.syncs == 1 + windows + 5 + len(m.block_seconds)
    assert fake.steps == m.warmup_steps + m.steps_per_block * len(m.block_seconds)


def _alternating(fake: FakeClock) -> float:
    # Odd-numbered syncs slow down the next window by 50%: blocks never agree.
    return STEP * (1.5 if fake.syncs % 2 else 1.0)


def test_min_blocks_measured_even_past_max_time() -> None:
    fake = FakeClock(_alternating)
    m = run(fake, min_time=0.1, max_time=0.1, min_blocks=7, warmup_time=1.0)
    assert len(m.block_seconds) == 7
    assert sum(m.block_seconds) > 0.1 * 7


def test_stops_at_max_time_when_never_stable() -> None:
    fake = FakeClock(_alternating)
    m = run(fake, min_time=1.0, max_time=3.0, min_blocks=5, warmup_time=1.0)
    rates = m.block_rates
    assert rel_iqr(rates) > 0.02  # never stable
    spent = sum(m.block_seconds)
    assert spent >= 3.0
    assert spent - m.block_seconds[-1] < 3.0  # the first block past max_time was the last


def test_stops_at_max_blocks() -> None:
    fake = FakeClock(_alternating)
    m = run(fake, min_time=1.0, max_time=1000.0, min_blocks=2, max_blocks=9, warmup_time=1.0)
    assert len(m.block_seconds) == 9


def test_stops_early_once_stable_after_min_time() -> None:
    fake = FakeClock()
    m = run(fake, min_time=1.0, max_time=5.0, min_blocks=3)
    # 0.25 s blocks: stable from the start, min_time reached after 4 blocks.
    assert len(m.block_seconds) == 4
    assert sum(m.block_seconds) == 1.0


def test_stable_but_min_blocks_not_reached() -> None:
    fake = FakeClock()
    m = run(fake, min_time=0.5, max_time=5.0, min_blocks=6)
    assert len(m.block_seconds) == 6


@pytest.mark.parametrize("items", [0, -1])
def test_items_per_step_below_one_rejected(items: int) -> None:
    fake = FakeClock()
    with pytest.raises(ValueError, match="items_per_step must be >= 1"):
        run(fake, items=items)
    assert fake.steps == 0  # rejected before running anything


def test_clock_that_does_not_advance_is_an_error() -> None:
    fake = FakeClock(0.0)
    with pytest.raises(ValueError, match="clock did not advance"):
        run(fake, warmup_time=0.0)


def test_clock_that_does_not_advance_in_the_warm_up_is_an_error() -> None:
    # The warm-up runs until its time runs out, which a clock that stands still never does:
    # the first window that took no time is the error (a step and a clock that do not belong
    # together, as a test that gave them two fake back ends once did), not an endless loop.
    def durations(fake: FakeClock) -> float:
        if fake.steps > 10_000:  # far past one window: the guard of this test, not the engine
            raise RuntimeError("the warm-up went on with a clock that stands still")
        return 0.0

    fake = FakeClock(durations)
    with pytest.raises(ValueError, match="clock did not advance over a warm-up window"):
        run(fake, max_steps_per_block=64)
    assert fake.steps == 1 + 64  # the first step, then one window of the largest size


def test_started_and_finished_at_come_from_the_wall_clock() -> None:
    fake = FakeClock()
    m = run(fake)
    assert m.started_at == 0.0
    assert m.finished_at == fake.now > 0
