"""Student's t distribution with integer degrees of freedom: its quantiles, from its CDF in
closed form (no scipy needed); and the chi-square quantile a check of spreads asks for."""

from __future__ import annotations

import functools
import math
import statistics


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for t >= 0, by the closed forms for integer df (Abramowitz & Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2 == 1:
        series, term = 0.0, math.cos(theta)
        if df > 1:
            series = term
            for power in range(3, df - 1, 2):
                term *= cos2 * (power - 1) / power
                series += term
        return (2 / math.pi) * (theta + math.sin(theta) * series)
    series, term = 1.0, 1.0
    for power in range(2, df - 1, 2):
        term *= cos2 * (power - 1) / power
        series += term
    return math.sin(theta) * series


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on the CDF;
    kept per ``(p, df)``: a suggestion of rounds asks for the same few quantiles many times)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {p}")
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    target = 2.0 * p - 1.0  # P(|T| <= t)
    lo, hi = 0.0, 1.0
    while _t_two_sided(hi, df) < target:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_two_sided(mid, df) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def chi2_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of the chi-square distribution with ``df`` degrees of freedom, by the
    Wilson-Hilferty cube: within 1% of the exact value at the 99% level from 1 degree of
    freedom up (6.59 against 6.63 at 1; 9.21 at 2)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {p}")
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    z = statistics.NormalDist().inv_cdf(p)
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3
