"""Robust statistics on block throughputs, checked against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_mxperf.measuring.stats import median, quantile, rel_iqr, rel_spread

LISTS = [
    [5.0],
    [2.0, 1.0],
    [3.0, 1.0, 2.0],
    [10.0, 20.0, 30.0, 40.0],
    [1.5, 9.25, 3.0, 3.0, 7.0, 100.0, 0.5],
    [float(x) for x in np.random.default_rng(7).normal(1000, 50, size=37)],
]


@pytest.mark.parametrize("values", LISTS)
@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0])
def test_quantile_equals_numpy_linear_percentile(values: list[float], q: float) -> None:
    expected = float(np.percentile(values, q * 100))
    assert quantile(values, q) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_quantile_does_not_reorder_its_input() -> None:
    values = [3.0, 1.0, 2.0]
    quantile(values, 0.5)
    assert values == [3.0, 1.0, 2.0]


def test_quantile_of_nothing_raises() -> None:
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([7.0], 7.0), ([1.0, 3.0], 2.0), ([9.0, 1.0, 5.0], 5.0), ([4.0, 1.0, 3.0, 2.0], 2.5)],
)
def test_median(values: list[float], expected: float) -> None:
    assert median(values) == expected
    assert median(values) == float(np.median(values))


def test_rel_iqr() -> None:
    # quartiles of 80, 100, 120, 140, 160 are 100 and 140; median 120
    assert rel_iqr([160.0, 80.0, 120.0, 100.0, 140.0]) == pytest.approx(40 / 120)


@pytest.mark.parametrize("values", [[], [42.0]])
def test_rel_iqr_of_fewer_than_two_values_is_zero(values: list[float]) -> None:
    assert rel_iqr(values) == 0.0


def test_rel_iqr_of_identical_values_is_zero() -> None:
    assert rel_iqr([5.0, 5.0, 5.0]) == 0.0


def test_rel_iqr_with_zero_median_is_infinite() -> None:
    assert rel_iqr([0.0, 0.0, 0.0, 1.0]) == math.inf


def test_rel_iqr_is_scale_free() -> None:
    values = [90.0, 100.0, 104.0, 111.0, 95.0]
    assert rel_iqr(values) == pytest.approx(rel_iqr([v * 37 for v in values]))


def test_rel_spread() -> None:
    assert rel_spread([100.0, 90.0, 110.0]) == pytest.approx(0.2)
    assert rel_spread([100.0, 100.0]) == 0.0
    # even count: median is the mean of the middle two
    assert rel_spread([80.0, 100.0, 120.0, 200.0]) == pytest.approx(120 / 110)


@pytest.mark.parametrize("values", [[], [3.0]])
def test_rel_spread_of_fewer_than_two_values_is_zero(values: list[float]) -> None:
    assert rel_spread(values) == 0.0


def test_rel_spread_with_zero_median_is_infinite() -> None:
    assert rel_spread([0.0, 0.0, 5.0]) == math.inf
