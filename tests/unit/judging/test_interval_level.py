"""A paired verdict records the level its interval was taken at (`Verdict.interval_level`):
the equivalence interval's for a pass, the 99% one's otherwise; JSON carries it both ways."""

from __future__ import annotations

import pytest

from pytest_mxperf.judging.decisions import (
    Policy,
    decide_arbitrated,
    decide_arbitration_pair,
    decide_paired,
)
from pytest_mxperf.judging.pairstats import PairedRound, paired_estimate
from pytest_mxperf.measuring.records import Outcome, Verdict
from pytest_mxperf.system import codec


def _estimate(*ratios: float):  # type: ignore[no-untyped-def]
    return paired_estimate([PairedRound(100.0, 100.0 * r) for r in ratios])


def test_a_pass_records_its_equivalence_level_anything_else_the_99_percent() -> None:
    same = _estimate(1.0, 1.001, 0.999)
    passed = decide_paired(same, Policy())
    assert passed.outcome is Outcome.PASS
    assert passed.interval == (same.same_low, same.same_high)
    assert passed.interval_level == same.same_level and same.same_level < same.confidence
    slower = _estimate(0.9, 0.9, 0.9)
    regressed = decide_paired(slower, Policy())
    assert regressed.outcome is Outcome.REGRESSED
    assert regressed.interval == (slower.low, slower.high)
    assert regressed.interval_level == slower.confidence == 0.99
    assert decide_paired(None, Policy()).interval_level is None  # no interval, no level


def test_an_arbitrated_verdict_carries_the_pairs_level() -> None:
    stored = Verdict(Outcome.REGRESSED, True, ("m: -27.4%",), -0.274, threshold=0.30)
    pair = decide_arbitration_pair(_estimate(1.0, 1.001, 0.999), stored, Policy())
    verdict = decide_arbitrated(stored, pair, False)
    assert verdict.interval == pair.interval and verdict.interval_level == pair.interval_level
    assert verdict.interval_level is not None


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99, None])
def test_the_level_goes_through_json(level: float | None) -> None:
    verdict = Verdict(Outcome.PASS, False, interval=(0.98, 1.02), interval_level=level)
    data = codec.to_dict(verdict)
    assert data["interval_level"] == level
    assert codec.from_dict(Verdict, data) == verdict
    del data["interval_level"]  # a report written before the field: read as unknown
    assert codec.from_dict(Verdict, data).interval_level is None
