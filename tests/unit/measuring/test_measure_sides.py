"""The timing engine in a paired run's side: short blocks after a short warm-up, blocks timed
in turns with the other side, and planned block sizes (fake clock, exact numbers)."""

from __future__ import annotations

import pytest
from fake_clock import BLOCK, STEP, FakeClock, run

from pytest_mxperf.measuring.measure import (
    SIDE_WARMUP_MAX_TIME,
    SIDE_WARMUP_MIN_TIME,
    MeasureConfig,
    Measurement,
    for_side,
    measure,
)


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
    # Warm-up stops once two windows agree (4 steps each here, 0.125 s), not after the 0.25 s
    # it took before 4bca10d, nor a plain run's 0.5 s.
    assert SIDE_WARMUP_MIN_TIME == 0.1
    assert m_side.warmup_seconds - m_side.first_step_seconds == 8 * STEP < 0.25
    assert m_plain.warmup_seconds - m_plain.first_step_seconds >= 0.5
    assert s.steps < p.steps / 2


def test_a_paired_side_stops_at_its_time_even_when_its_blocks_disagree() -> None:
    def noisy_blocks(config: MeasureConfig) -> Measurement:
        steps = iter([STEP, 2 * STEP, 3 * STEP] * 10_000)
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


def never_steady(config: MeasureConfig) -> Measurement:
    """A case whose warm-up windows never agree within 5%: each step takes 6% longer than the
    one before (as a loader whose workers hand over batches in lumps rarely settles within 5%
    over 0.25 s windows on a noisy VM)."""
    fake = FakeClock(lambda clock: STEP * 1.06**clock.steps)
    return measure(
        fake.step, items_per_step=8, sync=fake.sync, clock=fake, config=config, wall_clock=fake
    )


def test_a_paired_sides_warm_up_ends_at_its_cap_where_a_plain_run_goes_on() -> None:
    plain = never_steady(MeasureConfig(min_time=0.3, max_time=1.5, warmup_time=10.0))
    side = never_steady(for_side(MeasureConfig(min_time=0.3, max_time=1.5, warmup_time=10.0)))
    assert SIDE_WARMUP_MAX_TIME == 2.0
    assert not side.warmup_steady
    assert SIDE_WARMUP_MAX_TIME <= side.warmup_seconds - side.first_step_seconds < 2.2
    assert not plain.warmup_steady
    assert plain.warmup_seconds - plain.first_step_seconds >= 10.0
    # Its blocks are timed after it all the same.
    assert len(side.block_seconds) >= 3


def test_a_shorter_warm_up_time_of_the_users_stands_in_a_side() -> None:
    side = for_side(MeasureConfig(warmup_time=0.5))
    assert side.warmup_time == 0.5
    assert for_side(MeasureConfig(warmup_time=30.0)).warmup_time == SIDE_WARMUP_MAX_TIME


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

    def next(self, rate: float) -> bool:
        assert rate > 0
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


def test_the_wait_for_a_turn_is_no_part_of_the_warm_up() -> None:
    # In lock-step a side reports ready after its warm-up and waits while the other side
    # times its blocks; the record's warm-up seconds are its own steps only.
    waiting, alone = FakeClock(), FakeClock()

    class Waits(Turns):
        def ready(self) -> bool:
            self.fake.now += 8.0  # the other side's turn
            return super().ready()

    m = run(waiting, interleave=Waits(True, 3, waiting))
    m_alone = run(alone, interleave=Turns(True, 3, alone))
    assert m.warmup_seconds == m_alone.warmup_seconds < 1.0
    assert m.block_seconds == m_alone.block_seconds


def test_a_planned_block_size_below_one_step_is_refused() -> None:
    with pytest.raises(ValueError, match="steps_per_block must be >= 1, got 0"):
        run(FakeClock(), steps_per_block=0)


def test_alone_a_side_measures_as_without_turns() -> None:
    alone, plain = FakeClock(), FakeClock()
    m = run(alone, interleave=Turns(False, 7, alone))
    assert m.extra == {}
    assert m.block_seconds == run(plain).block_seconds
