"""The index: per case, a least-squares fit of every measured pair over the commit graph.

Each pair (base -> commit) measures ``x[commit] - x[base] = log(ratio)`` with the standard
error its interval gives (`Entry.log_se`). The fit weighs each by ``1 / se**2`` and fixes
``x = 0`` at the first commit of each connected part of the graph, so the index
``exp(x)`` is 1.0 there. The covariance ``(A^T W A)^-1`` gives each commit's interval and each
step's (a step: one commit's index over the previous commit's). A chain of N pairs adds up N
errors; an anchor pair (a commit paired with one much older) closes a loop and the fit spreads
the error over it, so the interval at the end of a long chain stays bounded.

Each pair's standard error is itself estimated, from a few rounds (`Pair.df` degrees of
freedom, often 2). The weights take it as it is (a pair's mean and its spread are independent
for normal rounds, so estimated weights leave the fit unbiased); the intervals do not take it as
known: each commit's and each step's quantile is Student's t with the Welch-Satterthwaite
degrees of freedom of its linear combination of pairs (`_quantile`), so a step that one pair of
3 rounds measures gets that pair's own t quantile of 2 df back, and a point that many pairs
measure gets nearly the normal one. A pair without degrees of freedom (an entry from a report
written before they were recorded) counts as known: its share takes the normal quantile.

Commits that no pair connects to the first commit form another part, with its own 1.0: the
result says so (`Fit.parts`) and never compares across parts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_mxperf.history.entries import z_of
from pytest_mxperf.judging.tdist import t_quantile

#: Effective degrees of freedom above this take the t quantile at this many (within 0.2% of the
#: normal one at 99%, and never below it): the quantile's cost grows with its df.
MAX_DF = 1000


@dataclass(frozen=True)
class Pair:
    """One measured pair: ``commit`` over ``base`` is ``exp(log_ratio)``."""

    base: str
    commit: str
    log_ratio: float
    se: float
    #: Degrees of freedom ``se`` was estimated with (None: taken as known).
    df: int | None = None


@dataclass(frozen=True)
class Step:
    """One commit's index over the previous commit's in the same part (its measured effect)."""

    commit: str
    previous: str
    ratio: float
    low: float
    high: float
    #: The least size of a marked step (0.025: 2.5% either way; 0: any size).
    min_step: float = 0.0
    #: The verdict of this step's own pair (one that spans exactly this step): -1 regressed,
    #: +1 improved, 0 neither or no such pair.
    decided: int = 0

    @property
    def excludes_none(self) -> bool:
        """The interval excludes "no change"."""
        return self.high < 1.0 or self.low > 1.0

    @property
    def changed(self) -> bool:
        """Marked: at least ``min_step`` in size, and either its interval excludes "no change"
        or its own pair decided a change the same way (`decided`)."""
        if abs(self.ratio - 1.0) < self.min_step:
            return False
        return self.excludes_none or self.decided == (1 if self.ratio > 1.0 else -1)


@dataclass(frozen=True)
class Point:
    commit: str
    index: float
    low: float
    high: float
    part: int  # which connected part (0: the one holding the first commit)


@dataclass(frozen=True)
class Fit:
    points: tuple[Point, ...]  # in commit order
    steps: tuple[Step, ...]
    parts: tuple[tuple[str, ...], ...]  # the commits of each connected part
    level: float  # of the points' intervals
    step_level: float  # of the steps' intervals
    min_step: float = 0.0  # the least size of a marked step

    def point(self, commit: str) -> Point:
        return next(p for p in self.points if p.commit == commit)

    @property
    def note(self) -> str:
        """Says when the graph falls in several parts ('' when it is one)."""
        if len(self.parts) < 2:
            return ""
        heads = ", ".join(part[0][:10] for part in self.parts[1:])
        return (
            f"{len(self.parts)} parts that no pair connects: each part's index is 1.0 at its "
            f"own first commit ({heads}), not comparable with the first part's"
        )


def _parts(order: Sequence[str], pairs: Sequence[Pair]) -> list[list[str]]:
    parent = {c: c for c in order}

    def find(c: str) -> str:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for p in pairs:
        parent[find(p.commit)] = find(p.base)
    groups: dict[str, list[str]] = {}
    for c in order:
        groups.setdefault(find(c), []).append(c)
    return sorted(groups.values(), key=lambda g: order.index(g[0]))


@dataclass(frozen=True)
class _Solved:
    """One part's fit: x (x[0] fixed at 0), its covariance, and ``x = coef @ y`` over the
    part's pairs ``mine`` (row 0 all zeros)."""

    x: npt.NDArray[np.float64]
    cov: npt.NDArray[np.float64]
    coef: npt.NDArray[np.float64]
    mine: tuple[Pair, ...]

    def quantile(self, level: float, g: npt.NDArray[np.float64]) -> float:
        """The two-sided ``level`` quantile of ``g @ x`` (`_quantile`)."""
        return _quantile(level, g @ self.coef, self.mine)


def _quantile(level: float, weights: npt.NDArray[np.float64], pairs: Sequence[Pair]) -> float:
    """The two-sided ``level`` quantile of ``sum(weights[k] * log_ratio[k])``: Student's t
    with the Welch-Satterthwaite degrees of freedom ``(sum v_k)^2 / sum(v_k^2 / df_k)``, where
    ``v_k = (weights[k] * se_k)^2`` is pair k's share of the variance; a pair without df adds
    nothing to the sum below (known), and with none the quantile is the normal one. The df is
    rounded down (a wider interval, never narrower)."""
    shares = (weights * np.array([p.se for p in pairs])) ** 2
    inverse_df = np.array([0.0 if p.df is None else 1.0 / p.df for p in pairs])
    unknown, total = float(shares**2 @ inverse_df), float(shares.sum())
    if unknown <= 0.0 or total <= 0.0:
        return z_of(level)
    df = min(total * total / unknown, MAX_DF)
    return t_quantile(0.5 + level / 2, max(int(df), 1))


def _solve(part: list[str], pairs: Sequence[Pair]) -> _Solved:
    """The fit of the commits of one part, x[0] fixed at 0."""
    col = {c: i - 1 for i, c in enumerate(part)}  # part[0] is fixed: column -1 means none
    mine = tuple(p for p in pairs if p.commit in col and p.base in col)
    n = len(part) - 1
    x, cov = np.zeros(len(part)), np.zeros((len(part), len(part)))
    coef = np.zeros((len(part), len(mine)))
    if n == 0:
        return _Solved(x, cov, coef, mine)
    a = np.zeros((len(mine), n))
    for row, p in enumerate(mine):
        if col[p.commit] >= 0:
            a[row, col[p.commit]] += 1.0
        if col[p.base] >= 0:
            a[row, col[p.base]] -= 1.0
    w = np.array([1.0 / p.se**2 for p in mine])
    y = np.array([p.log_ratio for p in mine])
    normal = a.T @ (a * w[:, None])
    inverse = np.linalg.inv(normal)
    coef[1:] = inverse @ (a.T * w)
    x[1:] = coef[1:] @ y
    cov[1:, 1:] = inverse
    return _Solved(x, cov, coef, mine)


def fit(
    order: Sequence[str],
    pairs: Sequence[Pair],
    level: float = 0.95,
    step_level: float = 0.99,
    min_step: float = 0.0,
    decided: Mapping[str, int] | None = None,
) -> Fit:
    """The index over the commits ``order`` (oldest first; commits of ``pairs`` missing from
    it are placed after it in their first-seen order) from ``pairs``; a step is marked as
    `Step.changed` says, ``decided`` giving the verdict of the pair ending at a commit that
    spans exactly its step (-1 regressed, +1 improved)."""
    commits = list(dict.fromkeys([*order, *(c for p in pairs for c in (p.base, p.commit))]))
    used = {c for p in pairs for c in (p.base, p.commit)}
    commits = [c for c in commits if c in used]
    for known in (level, step_level):
        z_of(known)  # a level no quantile is known for is refused, by name
    points: list[Point] = []
    steps: list[Step] = []
    parts = _parts(commits, [p for p in pairs if p.base != p.commit])
    for number, part in enumerate(parts):
        solved = _solve(part, pairs)
        x, cov, unit = solved.x, solved.cov, np.eye(len(part))
        for i, c in enumerate(part):
            se = math.sqrt(max(cov[i, i], 0.0))
            z = solved.quantile(level, unit[i]) if i else 0.0
            points.append(
                Point(c, math.exp(x[i]), math.exp(x[i] - z * se), math.exp(x[i] + z * se), number)
            )
            if i:
                d = x[i] - x[i - 1]
                sd = math.sqrt(max(cov[i, i] + cov[i - 1, i - 1] - 2 * cov[i, i - 1], 0.0))
                z_step = solved.quantile(step_level, unit[i] - unit[i - 1])
                steps.append(
                    Step(
                        c,
                        part[i - 1],
                        math.exp(d),
                        math.exp(d - z_step * sd),
                        math.exp(d + z_step * sd),
                        min_step,
                        (decided or {}).get(c, 0),
                    )
                )
    points.sort(key=lambda p: commits.index(p.commit))
    parted = tuple(tuple(p) for p in parts)
    return Fit(tuple(points), tuple(steps), parted, level, step_level, min_step)
