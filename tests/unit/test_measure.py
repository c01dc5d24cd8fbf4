"""The timing engine, driven by a fake clock: every number here is exact.

Durations are powers of two so float arithmetic on the fake clock never rounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from pytest_mxperf.measuring.measure import MeasureConfig, Measurement, for_side, measure
from pytest_mxperf.measuring.stats import rel_iqr

STEP = 2.0**-6  # 1/64 s per step
BLOCK = 0.25


class FakeClock:
    """A virtual clock; ``step`` and ``sync`` advance it by scripted amounts."""

    def __init__(
        self,
        step_seconds: Callable[[FakeClock], float] | float = STEP,
        sync_seconds: float = 0.0,
    ) -> None:
        self.now = 0.0
        self.steps = 0
        self.syncs = 0
        self.step_log: list[float] = []
        self._step_seconds = step_seconds
        self._sync_seconds = sync_seconds

    def __call__(self) -> float:
        return self.now

    def step(self) -> None:
        d = self._step_seconds
        seconds = d(self) if callable(d) else d
        self.steps += 1
        self.step_log.append(seconds)
        self.now += seconds

    def sync(self) -> None:
        self.syncs += 1
        self.now += self._sync_seconds


def run(fake: FakeClock, items: int = 8, **config: Any) -> Measurement:
    cfg = MeasureConfig(**{"block_time": BLOCK, **config})
    return measure(
        fake.step, items_per_step=items, sync=fake.sync, clock=fake, config=cfg, wall_clock=fake
    )


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


def test_started_and_finished_at_come_from_the_wall_clock() -> None:
    fake = FakeClock()
    m = run(fake)
    assert m.started_at == 0.0
    assert m.finished_at == fake.now > 0


def _sample() -> Measurement:
    return Measurement(
        items_per_step=4,
        steps_per_block=10,
        block_seconds=(0.5, 0.4, 0.25, 0.2, 0.8),
        warmup_steps=33,
        warmup_seconds=2.5,
        warmup_steady=True,
        first_step_seconds=1.25,
        sync_seconds=0.001,
        started_at=100.0,
        finished_at=110.0,
        extra={"form": "hybridized"},
    )


def test_measurement_values() -> None:
    m = _sample()
    # 40 items per block
    assert m.block_rates == [80.0, 100.0, 160.0, 200.0, 50.0]
    assert m.items_per_sec == 100.0  # median of 50, 80, 100, 160, 200
    assert m.iqr == 160.0 - 80.0
    assert m.rel_iqr == 0.8


def test_measurement_as_dict_from_dict_round_trip() -> None:
    m = _sample()
    data = m.as_dict()
    assert data["images_per_sec"] == 100.0
    assert data["rel_iqr"] == 0.8
    assert data["iqr"] == 80.0
    assert data["block_images_per_sec"] == [80.0, 100.0, 160.0, 200.0, 50.0]
    assert data["block_seconds"] == [0.5, 0.4, 0.25, 0.2, 0.8]
    assert data["extra"] == {"form": "hybridized"}
    back = Measurement.from_dict(data)
    assert back == m
    assert isinstance(back.block_seconds, tuple)


def test_measurement_round_trip_through_json() -> None:
    import json

    m = _sample()
    back = Measurement.from_dict(json.loads(json.dumps(m.as_dict())))
    assert back == m
    assert back.items_per_sec == m.items_per_sec


def test_a_paired_side_measures_three_short_blocks_after_a_short_warmup() -> None:
    plain = MeasureConfig(min_time=1.0, max_time=5.0)
    side = for_side(MeasureConfig(min_time=0.3, max_time=1.5))
    m_plain = measure(
        (p := FakeClock()).step, items_per_step=8, sync=p.sync, clock=p, config=plain, wall_clock=p
    )
    m_side = measure(
        (s := FakeClock()).step, items_per_step=8, sync=s.sync, clock=s, config=side, wall_clock=s
    )
    assert m_side.items_per_sec == m_plain.items_per_sec == 512.0
    # 0.1 s blocks of 1/64 s steps: 7 steps; 3 of them pass the side's 0.3 s.
    assert m_side.steps_per_block == 7 and len(m_side.block_seconds) == 3
    assert len(m_plain.block_seconds) == 5 and sum(m_plain.block_seconds) >= 1.0
    # Warm-up stops once steady after 0.25 s instead of 0.5 s.
    assert 0.25 <= m_side.warmup_seconds - m_side.first_step_seconds < 0.25 + 0.05 + STEP
    assert m_plain.warmup_seconds - m_plain.first_step_seconds >= 0.5
    assert s.steps < p.steps / 2


def test_a_paired_side_stops_at_its_time_even_when_its_blocks_disagree() -> None:
    def noisy_blocks(config: MeasureConfig) -> Measurement:
        steps = iter([STEP, 2 * STEP] * 10_000)
        fake = FakeClock(lambda _: next(steps))
        return measure(
            fake.step, items_per_step=8, sync=fake.sync, clock=fake, config=config, wall_clock=fake
        )

    # A side's max time is its min time (paired.sides.side_args): 3 blocks, however they disagree.
    side = noisy_blocks(for_side(MeasureConfig(min_time=0.3, max_time=0.3)))
    assert side.rel_iqr > 0.02 and len(side.block_seconds) == 3
    # With room to go on, the same blocks keep running until the soft cap.
    longer = noisy_blocks(for_side(MeasureConfig(min_time=0.3, max_time=1.5)))
    assert len(longer.block_seconds) > 3 and sum(longer.block_seconds) >= 1.5


class Turns:
    """A scripted `measure.Interleave`: in turns or alone, and how many blocks."""

    def __init__(
        self, together: bool, blocks: int, fake: FakeClock, shared_warmup: bool = False
    ) -> None:
        self.together, self.left, self.fake = together, blocks, fake
        self.shared_warmup = shared_warmup
        self.asked_at: list[int] = []

    def ready(self) -> bool:
        self.asked_at.append(self.fake.steps)
        return self.together

    def next(self) -> bool:
        self.asked_at.append(self.fake.steps)
        self.left -= 1
        return self.left > 0


def test_in_turns_each_block_waits_for_its_turn_and_the_other_side_decides_how_many() -> None:
    fake = FakeClock()
    turns = Turns(True, 7, fake)
    m = run(fake, interleave=turns, min_blocks=3, max_blocks=4)
    assert len(m.block_seconds) == 7  # not min/max_blocks: the controller's count
    assert m.extra == {"interleaved": True}
    assert m.items_per_sec == 512.0
    # Asked once after the warm-up, then after each block of 16 steps.
    first = turns.asked_at[0]
    assert turns.asked_at == [first + 16 * i for i in range(8)]


@pytest.mark.parametrize("together", [True, False])
def test_after_a_warm_up_beside_the_other_side_blocks_are_sized_from_a_window_run_alone(
    together: bool,
) -> None:
    # The warm-up ran beside the other side's setup at half speed; from the turn on (in turns
    # or alone), steps take STEP again.
    turns: Turns

    def durations(fake: FakeClock) -> float:
        return STEP if turns.asked_at else 2 * STEP

    shared, sized_on_warmup = FakeClock(durations), FakeClock(durations)
    turns = Turns(together, 3, shared, shared_warmup=True)
    m = run(shared, interleave=turns)
    assert m.steps_per_block == 16  # 0.25 s of steps as timed, not 8 steps of the warm-up's
    assert m.block_seconds[0] == BLOCK
    turns = Turns(together, 3, sized_on_warmup)
    assert run(sized_on_warmup, interleave=turns).steps_per_block == 8


@pytest.mark.parametrize("together", [True, False])
def test_a_planned_block_size_is_timed_as_given_without_a_window_alone(together: bool) -> None:
    # A later round's side (`pairdata.block_plan`): the warm-up ran beside the other side, but
    # the blocks' steps are known, so the turn goes straight to the first block.
    fake = FakeClock()
    turns = Turns(together, 3, fake, shared_warmup=True)
    m = run(fake, interleave=turns, steps_per_block=5)
    assert m.steps_per_block == 5
    assert m.block_seconds[0] == 5 * STEP
    # Not one step runs between the turn and the first block's 5 (the sizing window would).
    assert fake.steps == turns.asked_at[0] + 5 * len(m.block_seconds)
    sized = FakeClock()
    sized_turns = Turns(together, 3, sized, shared_warmup=True)
    run(sized, interleave=sized_turns)
    assert sized.steps > sized_turns.asked_at[0] + 16 * 3  # without a plan: a window first


def test_a_planned_block_size_below_one_step_is_refused() -> None:
    with pytest.raises(ValueError, match="steps_per_block must be >= 1, got 0"):
        run(FakeClock(), steps_per_block=0)


def test_alone_a_side_measures_as_without_turns() -> None:
    alone, plain = FakeClock(), FakeClock()
    m = run(alone, interleave=Turns(False, 7, alone))
    assert m.extra == {}
    assert m.block_seconds == run(plain).block_seconds
