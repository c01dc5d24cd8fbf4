"""The timing engine: warm up until steady, then time blocks of steps that each end in a sync.

Pure Python: the step, the device sync and the clock are parameters, so the engine runs with
MXNet (``sync=mx.nd.waitall``) and in tests with a fake clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol

from pytest_mxperf.config.options import DEFAULTS
from pytest_mxperf.measuring.stats import median, quantile, rel_iqr

Clock = Callable[[], float]
Step = Callable[[], object]
Sync = Callable[[], object]


class Interleave(Protocol):
    """Turns with another process measuring the same case (`pytest_mxperf.paired.turns`)."""

    @property
    def shared_warmup(self) -> bool:
        """The warm-up may have run beside the other process's work (on another CPU)."""
        ...

    def ready(self) -> bool:
        """Warm: True to time blocks in turns now, False to measure alone."""
        ...

    def next(self, rate: float) -> bool:
        """A block is done, at ``rate`` items/s: True to time another."""
        ...


@dataclass(frozen=True)
class MeasureConfig:
    """How long and how carefully to measure one case."""

    min_time: float = DEFAULTS["min_time"]
    max_time: float = DEFAULTS["max_time"]
    warmup_time: float = DEFAULTS["warmup_time"]
    block_time: float = 0.2
    min_blocks: int = 5
    max_blocks: int = 60
    warmup_min_steps: int = 3
    warmup_min_time: float = 0.5
    warmup_rel_tol: float = 0.05
    stable_rel_iqr: float = 0.02
    # A block is long enough that one sync costs less than this share of it.
    max_sync_share: float = 0.01
    max_steps_per_block: int = 100_000
    #: Blocks of this many steps instead of sized from the warm-up: a paired run's later rounds
    #: (`pairdata.block_plan`), so both sides time the same work and no side sizes alone again.
    steps_per_block: int | None = None
    #: Time the blocks in turns with another process (a paired run's lock-step sides).
    interleave: Interleave | None = None
    #: Shortest timed block of a data source alone (`pipelines.timing`): its batch times vary
    #: more than a model's steps (crop sizes, worker hand-offs), so its blocks are longer.
    source_block_time: float = 0.5


#: A measurement whose blocks spread more than this (IQR / median) is too noisy to judge.
MAX_REL_IQR = 0.25

#: A paired side's warm-up runs at least this long (and until steady): shorter than a plain
#: run's, it shortened a round with the first-block bias and the A/A spread unchanged
#: (docs/measurements.md, "Paired runs").
SIDE_WARMUP_MIN_TIME = 0.1

#: A paired side's warm-up ends after this long even while its windows still disagree (a plain
#: run goes on up to ``--mxperf-warmup-time``). Only the loaders with worker processes ran
#: longer in recorded runs: 2-10 s a side and round, because their 0.25 s windows hold 5-6
#: batches that arrive in lumps and rarely agree within 5% (in one process they settle within
#: 1 s); each was a turn of its own that the other side waited through
#: (docs/measurements.md, "The cost of a decision").
SIDE_WARMUP_MAX_TIME = 2.0

#: A paired side's shortest block of a data source it times in a turn of its own (a plain
#: run's, and a source's timed block by block in turns with the other side: 0.5 s). Such a
#: pipeline's rounds disagree by what each fresh instance of it runs at (one ImageRecordIter's
#: windows agreed within 0.4-3%, fresh ones in one process differed by up to 8%), not by its
#: blocks' length; a source timed in turns is judged by its block pairs, which shorter blocks
#: made noisier (docs/measurements.md, "The cost of a decision").
SIDE_SOURCE_BLOCK_TIME = 0.25


def for_side(config: MeasureConfig, alone: bool = False) -> MeasureConfig:
    """How a paired run's side measures: shorter blocks (3 of 0.1 s at least; a data source
    timed ``alone``, in a turn of its own, in blocks of :data:`SIDE_SOURCE_BLOCK_TIME`) and
    warm-up (:data:`SIDE_WARMUP_MIN_TIME` at least, :data:`SIDE_WARMUP_MAX_TIME` at most). A
    pair's evidence is the spread between rounds, which is mostly between processes (2-4% on a
    shared VM, against 1-2% between the blocks of one): longer blocks and warm-ups within a
    process buy the pair little, and every side of every round pays for them; both sides stop
    their warm-up alike."""
    source = SIDE_SOURCE_BLOCK_TIME if alone else config.source_block_time
    return replace(
        config,
        block_time=0.1,
        source_block_time=source,
        min_blocks=3,
        warmup_min_time=SIDE_WARMUP_MIN_TIME,
        warmup_time=min(config.warmup_time, SIDE_WARMUP_MAX_TIME),
    )


@dataclass(frozen=True)
class Measurement:
    """What one case measured: items/s per timed block and how it got there (JSON-safe)."""

    items_per_step: int
    steps_per_block: int
    block_seconds: tuple[float, ...]
    warmup_steps: int
    warmup_seconds: float
    warmup_steady: bool
    first_step_seconds: float
    sync_seconds: float
    started_at: float = 0.0
    finished_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def block_rates(self) -> list[float]:
        """Items per second of every timed block."""
        n = self.items_per_step * self.steps_per_block
        return [n / s for s in self.block_seconds]

    @property
    def items_per_sec(self) -> float:
        """Median items (images) per second over the timed blocks."""
        return median(self.block_rates)

    @property
    def iqr(self) -> float:
        rates = self.block_rates
        return quantile(rates, 0.75) - quantile(rates, 0.25)

    @property
    def rel_iqr(self) -> float:
        return rel_iqr(self.block_rates)

    @property
    def steady(self) -> bool:
        """Whether the blocks lie close enough together to judge (`MAX_REL_IQR`)."""
        return self.rel_iqr <= MAX_REL_IQR

    def edge_out(self, data: dict[str, Any]) -> dict[str, Any]:
        """`pytest_mxperf.system.codec`: the figures derived from the blocks, written beside
        them for readers of the JSON report (read back from the blocks)."""
        data["block_images_per_sec"] = self.block_rates
        data["images_per_sec"] = self.items_per_sec
        data["iqr"] = self.iqr
        data["rel_iqr"] = self.rel_iqr
        return data


def _time_steps(step: Step, sync: Sync, clock: Clock, n: int) -> float:
    start = clock()
    for _ in range(n):
        step()
    sync()
    return clock() - start


def measure(
    step: Step,
    *,
    items_per_step: int,
    sync: Sync,
    clock: Clock = time.perf_counter,
    config: MeasureConfig | None = None,
    wall_clock: Clock = time.time,
    extra: Mapping[str, Any] | None = None,  # the caller's notes (`Prepared.info`)
) -> Measurement:
    """Measure the throughput of ``step``, benchmark_score style but with a steady-state warm-up.

    1. The first step runs alone (graph build, allocation, autotune) and is timed apart.
    2. Warm-up windows of about ``block_time / 2`` run for at least ``warmup_min_time`` and
       until two windows in a row agree within ``warmup_rel_tol`` (steady), or until
       ``warmup_time`` runs out.
    3. Timed blocks of a fixed number of steps, each ending in ``sync()``, run until at least
       ``min_blocks`` blocks and ``min_time`` seconds are done and the blocks agree within
       ``stable_rel_iqr``, or until ``max_time`` (a soft cap: ``min_blocks`` always run).
       A block's steps come from the last warm-up window (or ``config.steps_per_block``).
    """
    cfg = config or MeasureConfig()
    if items_per_step < 1:
        raise ValueError(f"items_per_step must be >= 1, got {items_per_step}")
    if cfg.steps_per_block is not None and cfg.steps_per_block < 1:
        raise ValueError(f"steps_per_block must be >= 1, got {cfg.steps_per_block}")
    started_at = wall_clock()

    first = _time_steps(step, sync, clock, 1)
    warm_start = clock()
    warm_steps, n, window, per_step, steady = _warm_up(step, sync, clock, cfg, first, warm_start)
    interleaved, waited = _turn(cfg, clock)
    if cfg.steps_per_block is None and cfg.interleave is not None and cfg.interleave.shared_warmup:
        # The warm-up ran beside the other side's setup; its turn (in turns or alone) has come:
        # size the blocks from a window run alone, as they are timed (or they come out short).
        window = _time_steps(step, sync, clock, n)
        per_step = max(window / n, 1e-9)
        warm_steps += n
    warmup_seconds = first + (clock() - warm_start) - waited

    sync_cost, steps_per_block = _block_size(sync, clock, cfg, (window, n), per_step)
    # Interleaved: as many blocks as the other side is given, each timed in its turn.
    blocks = _time_blocks(
        lambda: _time_steps(step, sync, clock, steps_per_block),
        cfg,
        items_per_step * steps_per_block if interleaved else None,
    )
    return Measurement(
        items_per_step=items_per_step,
        steps_per_block=steps_per_block,
        block_seconds=tuple(blocks),
        warmup_steps=warm_steps,
        warmup_seconds=warmup_seconds,
        warmup_steady=steady,
        first_step_seconds=first,
        sync_seconds=sync_cost,
        started_at=started_at,
        finished_at=wall_clock(),
        extra={**({"interleaved": True} if interleaved else {}), **(extra or {})},
    )


def _turn(cfg: MeasureConfig, clock: Clock) -> tuple[bool, float]:
    """After the warm-up: (timed in turns with the other side, the seconds waited for the
    turn meanwhile: the other side's work, no part of this warm-up)."""
    asked = clock()
    interleaved = cfg.interleave is not None and cfg.interleave.ready()
    return interleaved, clock() - asked


def _warm_up(
    step: Step, sync: Sync, clock: Clock, cfg: MeasureConfig, first: float, warm_start: float
) -> tuple[int, int, float, float, bool]:
    """Warm-up windows until two in a row agree (steady) or the warm-up time runs out:
    (steps run, the last window's steps and seconds, its per-step time, steady)."""
    per_step = max(first, 1e-9)
    warm_steps = 1
    previous: float | None = None
    while True:
        n = _steps_for(cfg.block_time / 2, per_step, cfg)
        window = _time_steps(step, sync, clock, n)
        if window <= 0:
            # A clock that never advances would warm up forever (the time never runs out).
            raise ValueError("the clock did not advance over a warm-up window")
        per_step = max(window / n, 1e-9)
        warm_steps += n
        if (
            previous is not None
            and warm_steps >= cfg.warmup_min_steps
            and clock() - warm_start >= min(cfg.warmup_min_time, cfg.warmup_time)
            and abs(per_step / previous - 1) <= cfg.warmup_rel_tol
        ):
            return warm_steps, n, window, per_step, True
        previous = per_step
        if clock() - warm_start >= cfg.warmup_time:
            return warm_steps, n, window, per_step, False


def _block_size(
    sync: Sync, clock: Clock, cfg: MeasureConfig, last: tuple[float, int], per_step: float
) -> tuple[float, int]:
    """(the cost of one sync, steps per timed block) after a warm-up whose ``last`` window took
    so many seconds for so many steps."""
    window, n = last
    # Cost of one sync on an idle engine; blocks are made long enough to dwarf it.
    sync_cost = min(_time_steps(lambda: None, sync, clock, 0) for _ in range(5))
    # The last warm-up window paid one sync too: leave it out of the per-step time, or a block
    # sized to dwarf the sync comes out too short (at most halving the estimate, against noise).
    per_step = max((window - sync_cost) / n, per_step / 2, 1e-9)
    block_target = max(cfg.block_time, sync_cost / cfg.max_sync_share)
    return sync_cost, cfg.steps_per_block or _steps_for(block_target, per_step, cfg)


def _time_blocks(
    timed: Callable[[], float], cfg: MeasureConfig, turn_items: int | None
) -> list[float]:
    """Timed blocks' seconds: with ``turn_items`` (the items of a block, interleaved) as many
    as the other side is given, each in its turn; else until enough blocks and time agree
    within ``stable_rel_iqr``, or ``max_time`` is spent."""
    blocks: list[float] = []

    def timed_block() -> float:
        seconds = timed()
        if seconds <= 0:
            raise ValueError("the clock did not advance over a timed block")
        blocks.append(seconds)
        return seconds

    if turn_items is not None:
        assert cfg.interleave is not None
        while cfg.interleave.next(turn_items / timed_block()):
            pass
        return blocks
    spent = 0.0
    while len(blocks) < cfg.max_blocks:
        spent += timed_block()
        if len(blocks) < cfg.min_blocks:
            continue
        if spent >= cfg.max_time:
            break
        if spent >= cfg.min_time:
            rates = [1 / s for s in blocks]
            if rel_iqr(rates) <= cfg.stable_rel_iqr:
                break
    return blocks


def _steps_for(seconds: float, per_step: float, cfg: MeasureConfig) -> int:
    return int(min(max(1, math.ceil(seconds / per_step)), cfg.max_steps_per_block))
