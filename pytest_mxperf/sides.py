"""The two sides of a paired A/B run as subprocesses, measured in alternating rounds.

Each side (the code at a revision, the working tree) is one command that measures the selected
cases and writes them as a JSON list of case objects. Round ``k`` runs every side once, each in
its own process group with a time limit; the order is reversed on odd rounds so that neither side
always runs first (a warm cache, a cooling CPU or a background job then favours both equally).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf.procgroup import Finished, run_bounded

#: Placeholders replaced in a side's argv items and output pattern.
ROUND_PLACEHOLDER = "{round}"
OUTPUT_PLACEHOLDER = "{output}"


@dataclass(frozen=True)
class Side:
    """One side of a paired run.

    :param name: "rev" or "head" (any short label; names must differ).
    :param argv: the command; ``{output}`` and ``{round}`` in its items are replaced by the
        round's output path and the round number. Plain replacement, not ``str.format``, so
        other braces (``python -c "{...}"``) are left alone.
    :param cwd: the working directory (the revision's worktree, or the user's tree).
    :param env: the whole environment of the process; None inherits this process's one.
    :param output: path pattern of the JSON the side writes, e.g. ``/tmp/ab/rev-{round}.json``.
    :param ok_returncodes: exit codes that count as success (pytest exits 1 when a test fails,
        which a caller may accept when the JSON holds the cases that were measured).
    """

    name: str
    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str] | None
    output: str
    ok_returncodes: frozenset[int] = field(default_factory=lambda: frozenset({0}))

    def output_path(self, round_index: int) -> Path:
        return Path(self.output.replace(ROUND_PLACEHOLDER, str(round_index)))

    def command(self, round_index: int) -> list[str]:
        out = str(self.output_path(round_index))
        return [
            item.replace(OUTPUT_PLACEHOLDER, out).replace(ROUND_PLACEHOLDER, str(round_index))
            for item in self.argv
        ]


class SideStatus(enum.Enum):
    """How one side's run in one round ended."""

    OK = "ok"
    FAILED = "failed"  # exit code not in ok_returncodes, or killed by a signal
    TIMED_OUT = "timed out"
    BAD_OUTPUT = "bad output"  # exited fine, but its JSON is missing or not a list of objects


@dataclass(frozen=True)
class SideResult:
    """One side's run in one round: its cases, or why it has none."""

    side: str
    round: int
    status: SideStatus
    returncode: int | None
    seconds: float
    cases: tuple[dict[str, Any], ...] = ()
    message: str = ""
    output_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is SideStatus.OK


@dataclass(frozen=True)
class RoundResult:
    """One round: the order the sides ran in, and each side's result."""

    index: int
    order: tuple[str, ...]
    results: tuple[SideResult, ...]

    def result(self, side: str) -> SideResult:
        for res in self.results:
            if res.side == side:
                return res
        raise KeyError(f"no side {side!r} in round {self.index}")

    @property
    def failures(self) -> tuple[SideResult, ...]:
        return tuple(res for res in self.results if not res.ok)


class Phase(enum.Enum):
    START = "start"
    RUNNING = "running"
    DONE = "done"


@dataclass(frozen=True)
class Progress:
    """Reported to ``on_progress``: a side starts, is still running (every ``poll`` s), ends."""

    round: int
    side: str
    phase: Phase
    elapsed: float = 0.0
    result: SideResult | None = None


def round_order(sides: Sequence[Side], round_index: int) -> tuple[Side, ...]:
    """Sides in the given order on even rounds, reversed on odd ones (asv's interleaving)."""
    return tuple(sides) if round_index % 2 == 0 else tuple(reversed(sides))


def read_cases(path: Path) -> tuple[dict[str, Any], ...]:
    """The case objects a side wrote; ValueError with a clear message when there are none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"it wrote no output file {path}") from None
    except OSError as exc:
        raise ValueError(f"its output file {path} cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"its output file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ValueError(f"its output file {path} is not a JSON list of case objects")
    return tuple(data)


def run_side(
    side: Side,
    round_index: int,
    timeout: float,
    *,
    grace: float = 5.0,
    poll: float = 0.5,
    on_progress: Callable[[Progress], None] | None = None,
) -> SideResult:
    """Run one side once and read its cases. Exceptions from ``on_progress`` propagate."""
    out = side.output_path(round_index)
    # A file left by an earlier round or run must never pass for this run's output.
    out.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)

    def tick(elapsed: float) -> None:
        if on_progress is not None:
            on_progress(Progress(round_index, side.name, Phase.RUNNING, elapsed))

    done: Finished = run_bounded(
        side.command(round_index),
        cwd=side.cwd,
        env=side.env,
        timeout=timeout,
        grace=grace,
        poll=poll,
        on_tick=tick,
    )
    where = f"side {side.name!r}, round {round_index}"
    if done.timed_out:
        return SideResult(
            side.name,
            round_index,
            SideStatus.TIMED_OUT,
            None,
            done.seconds,
            message=f"{where}: {done.describe(timeout)}",
            output_tail=done.tail,
        )
    if done.returncode not in side.ok_returncodes:
        return SideResult(
            side.name,
            round_index,
            SideStatus.FAILED,
            done.returncode,
            done.seconds,
            message=f"{where}: {done.describe(timeout)}",
            output_tail=done.tail,
        )
    try:
        cases = read_cases(out)
    except ValueError as exc:
        return SideResult(
            side.name,
            round_index,
            SideStatus.BAD_OUTPUT,
            done.returncode,
            done.seconds,
            message=f"{where}: {exc}",
            output_tail=done.tail,
        )
    return SideResult(side.name, round_index, SideStatus.OK, done.returncode, done.seconds, cases)


def run_rounds(
    sides: Sequence[Side],
    rounds: int,
    timeout: float,
    on_progress: Callable[[Progress], None] | None = None,
    *,
    first_round: int = 0,
    grace: float = 5.0,
    poll: float = 0.5,
) -> list[RoundResult]:
    """Run ``rounds`` rounds of all sides, alternating their order, and return every result.

    A side that fails, times out or writes no usable output in one round is recorded as such;
    the other side and the later rounds still run. KeyboardInterrupt (or an exception raised by
    ``on_progress``) kills the running side's process group and propagates.

    :param first_round: index of the first round, so that a caller adding rounds after an
        UNKNOWN decision keeps the alternation and the output file names going.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    names = [side.name for side in sides]
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"sides need distinct names, got {names}")
    results: list[RoundResult] = []
    for index in range(first_round, first_round + rounds):
        order = round_order(sides, index)
        done: list[SideResult] = []
        for side in order:
            if on_progress is not None:
                on_progress(Progress(index, side.name, Phase.START))
            res = run_side(side, index, timeout, grace=grace, poll=poll, on_progress=on_progress)
            done.append(res)
            if on_progress is not None:
                on_progress(Progress(index, side.name, Phase.DONE, res.seconds, res))
        results.append(RoundResult(index, tuple(s.name for s in order), tuple(done)))
    return results
