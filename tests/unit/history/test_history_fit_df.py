"""The index's intervals take Student's t with the Welch-Satterthwaite degrees of freedom of
the pairs' standard errors (`Pair.df`), so they stay honest when the pairs' errors come from
2-3 rounds; a pair without df is taken as known (the normal quantile)."""

from __future__ import annotations

import math

import pytest

from pytest_mxperf.history.fit import Fit, Pair, fit
from pytest_mxperf.judging.tdist import t_quantile

C = [f"{i:02d}" + "0" * 38 for i in range(31)]


def _half(fitted: Fit, commit: str) -> float:
    """Half the width of a commit's interval in logs."""
    point = fitted.point(commit)
    return math.log(point.high / point.low) / 2


def test_a_step_one_pair_measures_takes_that_pairs_own_t_quantile() -> None:
    one = fit(C[:2], [Pair(C[0], C[1], math.log(0.93), 0.01, df=2)])
    step = one.steps[0]
    # At 99% the step's interval is the pair's own 99% interval: t of 2 df, 9.92 (not 2.58).
    assert math.log(step.high / step.low) / 2 == pytest.approx(t_quantile(0.995, 2) * 0.01)
    assert _half(one, C[1]) == pytest.approx(t_quantile(0.975, 2) * 0.01)
    # Without df the error is taken as known: the normal quantile, as before.
    known = fit(C[:2], [Pair(C[0], C[1], math.log(0.93), 0.01)])
    assert _half(known, C[1]) == pytest.approx(1.96 * 0.01, rel=1e-4)


def test_pairs_of_the_same_step_add_their_degrees_of_freedom() -> None:
    four = fit(C[:2], [Pair(C[0], C[1], 0.0, 0.01, df=2)] * 4)
    assert _half(four, C[1]) == pytest.approx(t_quantile(0.975, 8) * 0.01 / 2)
    # Equal shares, one of them known: (sum v)^2 / (v^2 / 2) = 8 degrees of freedom.
    mixed = fit(C[:2], [Pair(C[0], C[1], 0.0, 0.01, df=2), Pair(C[0], C[1], 0.0, 0.01)])
    assert _half(mixed, C[1]) == pytest.approx(t_quantile(0.975, 8) * 0.01 / math.sqrt(2))
