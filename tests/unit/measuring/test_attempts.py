"""The one attempts loop (`pytest_mxperf.measuring.attempts`): every attempt kept in order, the
better one kept, stopped by ``again``, and what a failure leaves."""

from __future__ import annotations

import pytest

from pytest_mxperf.measuring.attempts import Attempts, oom_message


def test_the_better_attempt_is_kept_while_again_says_so() -> None:
    figures = iter([3.0, 5.0, 4.0, 9.0])
    seen: list[tuple[float, float]] = []

    def again(best: float, last: float) -> bool:
        seen.append((best, last))
        return best < 5.0

    tries: Attempts[float] = Attempts(4)
    best = tries.run(lambda: next(figures), better=lambda a, b: a > b, again=again, keep=abs)
    assert best == 5.0 and tries.tried == [3.0, 5.0]
    assert seen == [(3.0, 3.0), (5.0, 5.0)]


def test_again_is_not_asked_after_the_last_attempt() -> None:
    asked: list[float] = []

    def again(best: float, last: float) -> bool:
        asked.append(last)
        return True

    tries: Attempts[float] = Attempts(2)
    tries.run(lambda: 1.0, better=lambda a, b: a > b, again=again)
    assert tries.tried == [1.0, 1.0] and asked == [1.0]


def test_an_attempt_that_raises_leaves_those_before_it() -> None:
    def attempt() -> float:
        if tries.tried:
            raise MemoryError("out of memory")
        return 2.0

    tries: Attempts[float] = Attempts(3)
    with pytest.raises(MemoryError):
        tries.run(attempt, better=lambda a, b: a > b, again=lambda b, last: True)
    assert tries.tried == [2.0] and tries.best == 2.0


def test_oom_message_is_the_errors_last_line_cut_short() -> None:
    stack = "\n".join(f"frame {i}" for i in range(50))
    assert oom_message(RuntimeError(f"{stack}\nout of memory on cpu\n")) == "out of memory on cpu"
    assert len(oom_message(RuntimeError("x" * 400))) == 300
