"""Paired rounds for the unit tests of the paired statistics (`pytest_mxperf.judging.pairstats`),
and the simulations' rule for more rounds."""

from __future__ import annotations

import math
from collections.abc import Iterable

from pytest_mxperf.judging.pairstats import Decision, PairedEstimate, PairedRound


def rounds_from(ratios: list[float], rev: float = 1000.0) -> list[PairedRound]:
    """Rounds whose HEAD/REV ratios are ``ratios`` (REV at ``rev`` img/s)."""
    return [PairedRound(rev, rev * r) for r in ratios]


def pairs_of(logs: Iterable[float], rev: float = 100.0) -> tuple[tuple[float, float], ...]:
    """Block pairs ``(rev, head)`` whose ``log(head / rev)`` are ``logs``."""
    return tuple((rev, rev * math.exp(x)) for x in logs)


def need_more_rounds(estimate: PairedEstimate, rounds_done: int, max_rounds: int) -> bool:
    """True when the decision is UNKNOWN and rounds are left to run.

    ``rounds_done`` counts rounds run, including ones a side failed in (those are not in the
    estimate), so a flaky side cannot make the run go on for ever.
    """
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
    return estimate.decision is Decision.UNKNOWN and rounds_done < max_rounds
