"""Paired rounds for the unit tests of the paired statistics (`pytest_mxperf.judging.pairstats`)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from pytest_mxperf.judging.pairstats import PairedRound


def rounds_from(ratios: list[float], rev: float = 1000.0) -> list[PairedRound]:
    """Rounds whose HEAD/REV ratios are ``ratios`` (REV at ``rev`` img/s)."""
    return [PairedRound(rev, rev * r) for r in ratios]


def pairs_of(logs: Iterable[float], rev: float = 100.0) -> tuple[tuple[float, float], ...]:
    """Block pairs ``(rev, head)`` whose ``log(head / rev)`` are ``logs``."""
    return tuple((rev, rev * math.exp(x)) for x in logs)
