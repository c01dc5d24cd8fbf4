"""Lock-step sides: both sides of a paired round are alive at once and take turns, so the two
measurements of a case are interleaved 0.1 s block by block instead of seconds apart.

Why: on a shared VM the speed wanders over seconds (0.1 s blocks correlate 0.7 with the next,
still 0.46 a second later), so REV measured now and HEAD measured a few seconds later differ by
whatever the machine did in between. Alternating single blocks ABBA cancels most of it: per
round, the spread of A/A ratios of one case fell from 4.0% (sequential sides, pinned) to 1.7%
(lock-step, pinned) and from 11.6% to 2.8% unpinned (24 alternating rounds, 2-vCPU VM).

Only one side ever runs: a side holds the *baton* for everything it does (collection, building
a model, its first step and warm-up) and hands it back at fixed points, over a Unix socket in
the round's temporary directory, one JSON object per line:

- side -> controller ``{"hello": side}`` on connecting; the answer ``go`` gives it the baton;
- ``{"ready": key, "nodeid": id}`` after a case's warm-up: ``block`` (time one block, then
  report ``{"done": 1}``; the answer is ``block`` again or ``end``) or ``solo`` (the other
  side has no such case now: measure it alone, as a side does without lock-step);
- a side that exits (its socket closes) frees the other.

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

#: Block pairs per case per round in lock-step (each side times this many 0.1 s blocks).
PAIRS = 5

GO, BLOCK, END, SOLO = "go", "block", "end", "solo"


class BatonLost(RuntimeError):
    """The controller is gone (it was interrupted or timed the round out)."""


class Baton:
    """A side's end of the lock-step socket: connects and waits for its first turn."""

    def __init__(self, spec: str) -> None:
        name, _, path = spec.partition("=")
        if not (name and path):
            raise ValueError(f"--mxperf-side-turns wants NAME=PATH, got {spec!r}")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._file = self._sock.makefile("rwb")
        self._ask({"hello": name})

    def _ask(self, message: dict[str, Any]) -> str:
        try:
            self._file.write((json.dumps(message) + "\n").encode())
            self._file.flush()
            line = self._file.readline()
        except OSError as exc:
            raise BatonLost(f"the paired run's controller is gone ({exc})") from None
        if not line:
            raise BatonLost("the paired run's controller is gone")
        return str(json.loads(line))

    def ready(self, nodeid: str, key: str) -> bool:
        """Warm and ready to time ``key``: True to time it in turns (`next_block`), False to
        measure it alone."""
        return self._ask({"ready": key, "nodeid": nodeid}) == BLOCK

    def next_block(self) -> bool:
        """A block is done: True to time another."""
        return self._ask({"done": 1}) == BLOCK

    def close(self) -> None:
        for closer in (self._file.close, self._sock.close):
            with contextlib.suppress(OSError):
                closer()


@dataclass(frozen=True)
class CaseTurns:
    """`measure.Interleave` for one case of a side: the baton, bound to the case."""

    baton: Baton
    nodeid: str
    key: str

    def ready(self) -> bool:
        return self.baton.ready(self.nodeid, self.key)

    def next(self) -> bool:
        return self.baton.next_block()


# --- the controller's side ---------------------------------------------------------------------


@dataclass
class _Side:
    state: str = "starting"  # starting | running | hello | ready | done | gone
    key: str = ""
    index: int = 0


@dataclass
class Conductor:
    """Who runs next, from what the two sides said: `event` takes a side's message (None: the
    side is gone) and returns the replies to send, ``[(side, reply)]``; at most one side runs at
    a time. ``order`` is the round's order (its first side starts and leads each ABBA)."""

    order: tuple[str, str]
    nodeids: Sequence[str] = ()
    pairs: int = PAIRS
    sides: dict[str, _Side] = field(default_factory=dict)
    #: The sides' turns left for the case in lock-step now (empty: none).
    sequence: list[str] = field(default_factory=list)
    #: Cases timed in lock-step, for the record.
    locked: list[str] = field(default_factory=list)
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
            s.index = self._index.get(str(message.get("nodeid", "")), len(self.nodeids))
        elif "done" in message:
            s.state = "done"
        else:
            raise ValueError(f"side {side}: unexpected message {message!r}")
        return self._next()

    def done(self) -> bool:
        return all(s.state == "gone" for s in self.sides.values())

    def _wake(self, side: str, reply: str) -> list[tuple[str, str]]:
        self.sides[side].state = "running"
        return [(side, reply)]

    def _next(self) -> list[tuple[str, str]]:
        sides = self.sides
        if any(s.state == "running" for s in sides.values()):
            return []
        if self.sequence:
            nxt = self.sequence.pop(0)
            if sides[nxt].state in ("ready", "done"):
                return self._wake(nxt, BLOCK)
            self.sequence.clear()  # the other side is gone mid-case: the lock-step ends
        first, second = self.order
        if any(s.state == "starting" for s in sides.values()):
            return []  # both start in the round's order: wait for the other's hello (or end)
        for name in self.order:
            if sides[name].state == "hello":
                return self._wake(name, GO)
        for name in self.order:
            if sides[name].state == "done":
                return self._wake(name, END)
        a, b = sides[first], sides[second]
        if a.state == "ready" and b.state == "ready":
            if a.key == b.key:
                self.locked.append(a.key)
                self.sequence = [
                    name
                    for i in range(self.pairs)
                    for name in ((first, second) if i % 2 == 0 else (second, first))
                ]
                return self._wake(self.sequence.pop(0), BLOCK)
            # Different cases: the one the other side has passed already (or never has) goes
            # alone; the selection's order says which.
            alone = first if (a.index, 0) <= (b.index, 1) else second
            return self._wake(alone, SOLO)
        for name, other in ((first, b), (second, a)):
            if sides[name].state == "ready" and other.state == "gone":
                return self._wake(name, SOLO)
        return []  # both gone: the round is over
