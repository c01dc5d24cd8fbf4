"""Student's t distribution of the paired statistics (`pytest_mxperf.judging.tdist`): quantiles
against printed tables, closed forms, limits and bad arguments."""

from __future__ import annotations

import math

import pytest

from pytest_mxperf.judging.tdist import t_quantile


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [  # printed tables of Student's t
        (0.995, 1, 63.657),
        (0.995, 2, 9.925),
        (0.995, 3, 5.841),
        (0.995, 4, 4.604),
        (0.995, 6, 3.707),
        (0.995, 9, 3.250),
        (0.995, 29, 2.756),
        (0.975, 1, 12.706),
        (0.975, 4, 2.776),
        (0.975, 29, 2.045),
        (0.95, 5, 2.015),
        (0.90, 6, 1.440),
        (0.995, 120, 2.617),
    ],
)
def test_t_quantile_matches_the_tables(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=6e-4)
    assert t_quantile(1 - p, df) == pytest.approx(-expected, abs=6e-4)


def test_t_quantile_closed_forms_and_limits() -> None:
    for p in (0.01, 0.3, 0.5, 0.8, 0.999):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), abs=1e-9)  # Cauchy
        closed_2 = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
        assert t_quantile(p, 2) == pytest.approx(closed_2, abs=1e-9)
        assert t_quantile(p, 7) + t_quantile(1 - p, 7) == pytest.approx(0.0, abs=1e-9)
    # Many degrees of freedom: the normal distribution.
    assert t_quantile(0.975, 5000) == pytest.approx(1.959964, abs=1e-3)
    assert t_quantile(0.5, 3) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.5, 0)])
def test_t_quantile_refuses_bad_arguments(p: float, df: int) -> None:
    with pytest.raises(ValueError):
        t_quantile(p, df)
