"""Lock-step sides: both sides of a paired round are alive at once and take turns, so the two
measurements of a case are interleaved 0.1 s block by block instead of seconds apart.

Why: on a shared VM the speed wanders over seconds (0.1 s blocks correlate 0.7 with the next,
still 0.46 a second later), so REV measured now and HEAD measured a few seconds later differ by
whatever the machine did in between. Alternating single blocks ABBA cancels most of it: per
round, the spread of A/A ratios of one case fell from 4.0% (sequential sides, pinned) to 1.7%
(lock-step, pinned) and from 11.6% to 2.8% unpinned (24 alternating rounds, 2-vCPU VM).

Nothing runs beside a timed block: a side holds the *baton* for everything it does and hands it
back at fixed points, over a Unix socket in the round's temporary directory, one JSON object per
line. What it does between those points is either timed (a block, a case measured alone), which
the other side only ever waits through, or untimed (collection, building a model, its first step
and warm-up), which on CPU-only rounds (``overlap``) both sides may do at once, each on a CPU of
its own: the setups that made up half of a round's time then cost about half as much on two
CPUs. GPU rounds keep them apart (cuDNN's autotune times its algorithms in the first steps).
The messages:

- side -> controller ``{"hello": side}`` on connecting; the answer ``go`` gives it the baton;
- ``{"ready": key, "nodeid": id}`` after a case's warm-up: ``block`` (time one block, then
  report ``{"done": 1, "rate": items_per_sec}``; the answer is ``block`` again or ``end``) or
  ``solo`` (the other side has no such case now: measure it alone, as a side does without
  lock-step). The controller gives ``PAIRS`` block pairs, and two more at a time up to
  ``MAX_PAIRS`` while the pairs' throughput ratio has a standard error above
  ``TARGET_SE``: a quiet machine stops at 3 pairs, a noisy one buys certainty where it is
  short, within the round;
- ``{"ready": key, "nodeid": id, "solo": true}`` before a case that cannot be timed block by
  block in turns (a data-parallel launch: its ranks set up, warm up and time on their own):
  always ``solo``, when nothing else runs; all of it is the side's timed turn;
- a side that exits (its socket closes) frees the other.

A side pinned to the timing CPUs (``cpus.for_sides``) may be given wider ones for its untimed
work: `Baton` moves all its threads to those on ``go`` and ``end`` and back on ``block`` and
``solo``, unless the case is timed ``wide`` (an input pipeline that decodes in the caller's
thread, timed where a run of its own would time it).

The controller's decisions are `Conductor` (pure: events in, replies out); `Baton` is a side's
end of the socket.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.sideorders import Turns
from pytest_mxperf.measuring.stats import paired_blocks
from pytest_mxperf.system import cpus as cpu_sets

#: Block pairs per case per round in lock-step (each side times at least this many 0.1 s
#: blocks), and at most: more pairs, two at a time, while the round's ratio is less certain
#: than TARGET_SE (its standard error on the log scale, from the block rates the sides report).
#: 3 and 2%: as decisive as 5 and 1% on recorded A/A cases, for less timed work
#: (docs/measurements.md, "Paired runs").
PAIRS = 3
MAX_PAIRS = 15
TARGET_SE = 0.02

GO, BLOCK, END, SOLO = "go", "block", "end", "solo"


def more_pairs(
    rev: Sequence[float],
    head: Sequence[float],
    pairs: int = PAIRS,
    max_pairs: int = MAX_PAIRS,
    target_se: float = TARGET_SE,
) -> int:
    """How many more block pairs a case in lock-step gets after the rates ``rev`` and ``head``
    its sides reported so far: two (the next ABBA; fewer up to ``max_pairs``) while both sides
    reported every block, at least ``pairs`` and fewer than ``max_pairs`` are done, and the
    pairs' throughput ratio is less certain than ``target_se``; else 0. The controller's rule,
    and the one scripts/replay_pairs.py replays."""
    done = len(rev)
    if len(head) != done or not pairs <= done < max_pairs:
        return 0
    if paired_blocks(rev, head).se <= target_se:
        return 0
    return min(2, max_pairs - done)


def _spread_on(wide: bool) -> tuple[str, ...]:
    """The replies on which a side's threads go to its untimed work's CPUs: ``go`` and ``end``;
    for a case timed ``wide``, every reply of its turns too."""
    return (GO, END, BLOCK, SOLO) if wide else (GO, END)


class BatonLost(RuntimeError):
    """The controller is gone (it was interrupted or timed the round out)."""


class Baton:
    """A side's end of the lock-step socket: connects and waits for its first turn.

    ``spread``: the CPUs for its untimed work (None: where it is pinned now, for everything);
    it times on the CPUs it was pinned to when made."""

    def __init__(self, turns: Turns, spread: frozenset[int] | None = None) -> None:
        self._timing = cpu_sets.available() if spread else None
        self._spread = spread if self._timing is not None and spread != self._timing else None
        #: Where the side's threads are now: True on ``spread``.
        self._spread_now = False
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(str(turns.path))
        self._file = self._sock.makefile("rwb")
        self._ask({"hello": turns.name})

    @property
    def shared_warmup(self) -> bool:
        """Untimed work may run beside the other side's (the round overlaps setups)."""
        return self._spread is not None

    def _ask(self, message: dict[str, Any], spread_on: tuple[str, ...] = (GO, END)) -> str:
        """Send ``message``, wait for the reply; the side's threads go to ``spread`` on the
        replies in ``spread_on`` and to the timing CPUs on the others."""
        try:
            self._file.write((json.dumps(message) + "\n").encode())
            self._file.flush()
            line = self._file.readline()
        except OSError as exc:
            raise BatonLost(f"the paired run's controller is gone ({exc})") from None
        if not line:
            raise BatonLost("the paired run's controller is gone")
        reply = str(json.loads(line))
        self._place(spread=reply in spread_on)
        return reply

    def _place(self, spread: bool) -> None:
        if self._spread is None or self._timing is None or spread == self._spread_now:
            return
        cpu_sets.pin_threads(self._spread if spread else self._timing)
        self._spread_now = spread

    def ready(self, nodeid: str, key: CaseKey, wide: bool = False) -> bool:
        """Warm and ready to time ``key``: True to time it in turns (`next_block`), False to
        measure it alone. ``wide``: its blocks (or its measurement alone) run where the side's
        untimed work does (``spread``), as in a run of its own, not on the timing CPUs (an
        input pipeline that decodes in the caller's thread: its decoding and MXNet's engine
        share one CPU when pinned, and measure a lower figure than a run of its own)."""
        asked = {"ready": str(key), "nodeid": nodeid}
        return self._ask(asked, spread_on=_spread_on(wide)) == BLOCK

    def alone(self, nodeid: str, key: CaseKey) -> None:
        """Wait for a turn to run ``key`` alone, set-up included (a data-parallel launch, an
        input pipeline): nothing of the other side runs until this side asks for its next turn
        or ends, so the case runs where the side's untimed work does (``spread``), as in a run
        of its own: a loader's worker processes and a launch's ranks get every CPU, not the one
        a block is timed on."""
        self._ask({"ready": str(key), "nodeid": nodeid, "solo": True}, spread_on=(GO, END, SOLO))

    def next_block(self, rate: float, wide: bool = False) -> bool:
        """A block is done, at ``rate`` items/s: True to time another (``wide``: as the case's
        `ready`)."""
        return self._ask({"done": 1, "rate": rate}, spread_on=_spread_on(wide)) == BLOCK

    def close(self) -> None:
        for closer in (self._file.close, self._sock.close):
            with contextlib.suppress(OSError):
                closer()


@dataclass(frozen=True)
class CaseTurns:
    """`measure.Interleave` for one case of a side: the baton, bound to the case (``wide``:
    `Baton.ready`'s)."""

    baton: Baton
    nodeid: str
    key: CaseKey
    wide: bool = False

    @property
    def shared_warmup(self) -> bool:
        return self.baton.shared_warmup

    def ready(self) -> bool:
        return self.baton.ready(self.nodeid, self.key, self.wide)

    def next(self, rate: float) -> bool:
        return self.baton.next_block(rate, self.wide)


# --- the controller's side ---------------------------------------------------------------------


@dataclass
class _Side:
    # starting | hello | busy (untimed work) | ready | timing (a block or a case alone) | done
    # | gone
    state: str = "starting"
    key: str = ""
    index: int = 0
    #: Its ready case runs alone (never block by block in turns).
    solo: bool = False


@dataclass
class Conductor:
    """Who runs next, from what the two sides said: `event` takes a side's message (None: the
    side is gone) and returns the replies to send, ``[(side, reply)]``. Nothing runs beside a
    timed block or case; with ``overlap`` both sides may do untimed work at once, without it
    at most one side runs at a time. ``order`` is the round's order (its first side starts and
    leads each ABBA)."""

    order: tuple[str, str]
    nodeids: Sequence[str] = ()
    pairs: int = PAIRS
    max_pairs: int = MAX_PAIRS
    target_se: float = TARGET_SE
    overlap: bool = False
    sides: dict[str, _Side] = field(default_factory=dict)
    #: The sides' turns left for the case in lock-step now (empty: none).
    sequence: list[str] = field(default_factory=list)
    #: Cases timed in lock-step, for the record.
    locked: list[str] = field(default_factory=list)
    #: The block rates each side reported for the case in lock-step now.
    rates: dict[str, list[float]] = field(default_factory=dict)
    #: Node id -> its place in the selection (which side is behind when their cases differ).
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.sides = {name: _Side() for name in self.order}
        self._index = {nodeid: i for i, nodeid in enumerate(self.nodeids)}

    def event(self, side: str, message: dict[str, Any] | None) -> list[tuple[str, str]]:
        s = self.sides[side]
        if message is None:
            s.state = "gone"
        elif "hello" in message:
            s.state = "hello"
        elif "ready" in message:
            s.state, s.key = "ready", str(message["ready"])
            s.solo = bool(message.get("solo"))
            s.index = self._index.get(str(message.get("nodeid", "")), len(self.nodeids))
        elif "done" in message:
            s.state = "done"
            if "rate" in message and side in self.rates:
                self.rates[side].append(float(message["rate"]))
        else:
            raise ValueError(f"side {side}: unexpected message {message!r}")
        return self._next()

    def done(self) -> bool:
        return all(s.state == "gone" for s in self.sides.values())

    def _abba(self, start: int, stop: int) -> list[str]:
        """The turns of pairs ``start`` to ``stop``: the round's first side leads even pairs."""
        first, second = self.order
        return [
            name
            for i in range(start, stop)
            for name in ((first, second) if i % 2 == 0 else (second, first))
        ]

    def _more_pairs(self) -> None:
        """The case's planned pairs are timed: the pairs `more_pairs` gives (the next ABBA), or
        the case's lock-step ends."""
        first, second = self.order
        rev, head = self.rates[first], self.rates[second]
        extra = more_pairs(rev, head, self.pairs, self.max_pairs, self.target_se)
        if extra:
            self.sequence = self._abba(len(rev), len(rev) + extra)
            return
        self.rates.clear()

    def _wake(self, *replies: tuple[str, str]) -> list[tuple[str, str]]:
        for side, reply in replies:
            self.sides[side].state = "busy" if reply in (GO, END) else "timing"
        return list(replies)

    def _next(self) -> list[tuple[str, str]]:
        sides = self.sides
        states = {s.state for s in sides.values()}
        if "timing" in states or ("busy" in states and not self.overlap):
            return []
        if not self.sequence and self.rates:
            self._more_pairs()
        if self.sequence:
            nxt = self.sequence.pop(0)
            if sides[nxt].state in ("ready", "done"):
                return self._wake((nxt, BLOCK))
            self.sequence.clear()  # the other side is gone mid-case: the lock-step ends
            self.rates.clear()
        first, second = self.order
        if "starting" in states:
            return []  # both start in the round's order: wait for the other's hello (or end)
        untimed = [(name, GO) for name in self.order if sides[name].state == "hello"]
        untimed += [(name, END) for name in self.order if sides[name].state == "done"]
        if untimed:
            return self._wake(*(untimed if self.overlap else untimed[:1]))
        if "busy" in states:
            return []  # nothing is timed beside a side's untimed work
        a, b = sides[first], sides[second]
        if a.state == "ready" and b.state == "ready":
            if a.key == b.key and not (a.solo or b.solo):
                self.locked.append(a.key)
                self.rates = {first: [], second: []}
                self.sequence = self._abba(0, self.pairs)
                return self._wake((self.sequence.pop(0), BLOCK))
            # Different cases: the one the other side has passed already (or never has) goes
            # alone; the selection's order says which. Within one test (a sweep's points,
            # then the case trained on its source) a case that runs in a turn of its own goes
            # first: the side ready for a later case in turns waits for the other to get there.
            alone = first if (a.index, not a.solo, 0) <= (b.index, not b.solo, 1) else second
            return self._wake((alone, SOLO))
        for name, other in ((first, b), (second, a)):
            if sides[name].state == "ready" and other.state == "gone":
                return self._wake((name, SOLO))
        return []  # both gone: the round is over
