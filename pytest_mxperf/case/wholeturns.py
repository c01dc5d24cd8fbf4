"""Whole-case turns: a case a lock-step side runs alone (an input pipeline, end-to-end
training) is measured :data:`WHOLE_TURNS` times a round, and the two sides' turns go ABBA
(`paired.turns.Conductor`): REV, HEAD, HEAD, REV.

Why: such a case cannot be timed block by block in turns (its loader threads and workers would
fill their queues during the other side's blocks), so a round used to give it one measurement a
side, seconds apart, and nothing within the round to judge its noise by: its interval took the
spread between rounds with ``n - 1`` degrees of freedom, and an input pipeline whose rounds
swing by 5-10% stayed inconclusive for 8-10 rounds. Two turns a side make two pairs a round
(`paired.pairdata.block_pairs`): a drift of the machine over the round weighs on both sides
alike, the round's ratio is the throughput ratio over both pairs, and the pairs say how noisy a
round is (`judging.pairstats.PairedRound.whole`).

Each turn measures the case from scratch in the same process (build, first step, warm-up,
blocks), as a side does without lock-step; the case's figure is the median over both turns'
blocks and its measurement records each turn's images/sec under
`measuring.measure.TURN_RATES`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Optional, Protocol

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.measuring.measure import TURN_RATES, Measurement
from pytest_mxperf.measuring.records import CaseResult

#: Measurements a lock-step side makes of a case it runs alone, each round.
WHOLE_TURNS = 2

Measure = Callable[[CaseResult], tuple[CaseResult, Optional[BaselineRef]]]


class Turns(Protocol):
    """What this module asks of a side's baton (`paired.turns.Baton`)."""

    def alone(self, nodeid: str, key: str) -> None: ...


def measure_in_turns(
    baton: Turns, nodeid: str, result: CaseResult, measure: Measure, turns: int
) -> tuple[CaseResult, BaselineRef | None]:
    """Measure ``result``'s case ``turns`` times, each in a turn of its own (``baton.alone``),
    and merge them (:func:`merge_turns`); a turn that measured nothing ends the case as that
    turn ended. The result's window spans all its turns."""
    if turns < 1:
        raise ValueError(f"turns must be >= 1, got {turns}")
    start = time.time()
    done: list[CaseResult] = []
    ref: BaselineRef | None = None
    for _ in range(turns):
        baton.alone(nodeid, str(result.key))
        one, ref = measure(result)
        done.append(one)
        if one.measurement is None:
            break
    return replace(merge_turns(done), window=[start, time.time()]), ref


def merge_turns(results: Sequence[CaseResult]) -> CaseResult:
    """One case result from its whole-case turns: the first turn's, with every turn's blocks
    (the figure is their median), attempts and warnings, and each turn's images/sec under
    `TURN_RATES`; the first turn that measured nothing, as it is, when one did not."""
    if not results:
        raise ValueError("no turns to merge")
    failed = [r for r in results if r.measurement is None]
    if failed:
        return failed[0]
    if len(results) == 1:
        return results[0]
    first = results[0]
    measurements = [r.measurement for r in results if r.measurement is not None]
    warnings: list[str] = []
    for r in results:
        warnings += [w for w in r.warnings if w not in warnings]
    return replace(
        first,
        measurement=merge_measurements(measurements),
        attempts=[a for r in results for a in r.attempts],
        warnings=warnings,
    )


def merge_measurements(parts: Sequence[Measurement]) -> Measurement:
    """The first measurement with the others' blocks after its own, each scaled to its number of
    steps per block (a block's seconds for the first's steps at the other's pace), its end time
    the last one's, and every part's images/sec under `TURN_RATES`."""
    first = parts[0]
    seconds = list(first.block_seconds)
    for m in parts[1:]:
        if m.items_per_step != first.items_per_step:
            raise ValueError(
                f"whole-case turns measured {first.items_per_step} and {m.items_per_step} "
                "images per step: not one case"
            )
        seconds += [s * first.steps_per_block / m.steps_per_block for s in m.block_seconds]
    return replace(
        first,
        block_seconds=tuple(seconds),
        finished_at=parts[-1].finished_at,
        extra={**first.extra, TURN_RATES: [m.items_per_sec for m in parts]},
    )
