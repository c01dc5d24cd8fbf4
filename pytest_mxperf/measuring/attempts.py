"""The one attempts loop every kind of case measures with (a model, an input pipeline,
end-to-end training, a data-parallel launch): up to so many attempts while the caller's
``again`` says so, the better attempt kept; and the one line an out-of-memory error is told by.

The caller says what an attempt is, which of two is better and whether to go on: a model's
best attempt is the steadier, then faster (`runner.better_attempt`); a data-parallel case's
the steadier, then more efficient.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


def _same(attempt: T) -> T:
    return attempt


@dataclass
class Attempts(Generic[T]):
    """Up to ``limit`` attempts of one case: every attempt made (``tried``, also when one
    raised) and the best kept so far (``best``)."""

    limit: int
    tried: list[T] = field(default_factory=list)
    best: T | None = None

    def run(
        self,
        attempt: Callable[[], T],
        *,
        better: Callable[[T, T], bool],
        again: Callable[[T, T], bool],
        keep: Callable[[T], T] = _same,
    ) -> T | None:
        """Attempt until ``limit``, or until ``again(best, last)`` says no more; an attempt
        ``better`` than the best so far is kept as ``keep`` makes it. Returns the best."""
        for i in range(self.limit):
            last = attempt()
            self.tried.append(last)
            if self.best is None or better(last, self.best):
                self.best = keep(last)
            if i + 1 < self.limit and not again(self.best, last):
                break
        return self.best


def oom_message(exc: BaseException) -> str:
    """What a case that ran out of memory says: the error's last line, at most 300 characters
    (MXNet's out-of-memory errors carry a long C++ stack before it)."""
    return str(exc).strip().splitlines()[-1][:300]
