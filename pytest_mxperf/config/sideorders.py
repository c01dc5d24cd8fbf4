"""What a side process of a paired run was told: the hidden ``--mxperf-side-*`` options, parsed
and checked once into the frozen `SideOrders` (None: the process is no side).

A paired run's controller writes these options (`pytest_mxperf.paired.sides.side_args` and the
rounds), the side reads them here; both are this package at the same version, so the flags below
are the one place their spelling lives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mxperf.config.settings import OptionError
from pytest_mxperf.system import cpus

#: Write the measured cases to this file instead of judging them (makes the process a side).
OUT = "--mxperf-side-out"
#: A file of the node ids to run, one a line; the others are deselected.
SELECT = "--mxperf-side-select"
#: Profile every case after measuring it (a switch).
PROFILE = "--mxperf-side-profile"
#: ``NAME=PATH``: take turns with the other side through the controller's socket at PATH.
TURNS = "--mxperf-side-turns"
#: CPUs (``0-3,6``) its untimed work may spread over, wider than those it times on.
SPREAD = "--mxperf-side-spread"
#: A file of the steps per timed block of each case (`pytest_mxperf.paired.sides.write_plan`).
PLAN = "--mxperf-side-plan"
#: A file of this side's earlier results of the cases a later round does not measure again
#: (`pytest_mxperf.paired.sides.write_reuse`): such a case gets its earlier result back.
REUSE = "--mxperf-side-reuse"

#: Every hidden option of a side: ``(flag, is a switch)``.
FLAGS: tuple[tuple[str, bool], ...] = (
    (OUT, False),
    (SELECT, False),
    (PROFILE, True),
    (TURNS, False),
    (SPREAD, False),
    (PLAN, False),
    (REUSE, False),
)


def dest(flag: str) -> str:
    """The argparse destination of a side's flag: ``--mxperf-side-out`` -> ``mxperf_side_out``."""
    return flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Turns:
    """A lock-step side's end of the controller's socket: its name there and the socket."""

    name: str
    path: Path

    def __str__(self) -> str:
        return f"{self.name}={self.path}"


@dataclass(frozen=True)
class SideOrders:
    """One record of what a side process was told (its hidden options), checked once."""

    #: Where it writes its measured cases and collection errors (instead of judging them).
    out: Path
    #: The file of node ids it runs (None: every collected test).
    select: Path | None = None
    #: Profile every case after measuring it (a paired run's profiling rounds).
    profile: bool = False
    #: Lock-step: the controller's socket it takes turns through (None: it runs alone).
    turns: Turns | None = None
    #: Lock-step sides whose untimed work may spread wider than the CPUs they time on.
    spread: frozenset[int] | None = None
    #: The steps per block of each case, after a paired run's first round (None: no plan).
    plan: Path | None = None
    #: This side's earlier results of the cases this round does not measure (None: it
    #: measures every case of its node ids).
    reuse: Path | None = None


def parse_turns(text: str) -> Turns:
    """``NAME=PATH`` -> `Turns`; raises ValueError when either part is missing."""
    name, _, path = text.partition("=")
    if not (name and path):
        raise ValueError("wants NAME=PATH")
    return Turns(name, Path(path))


def side_orders(option: Callable[[str], Any]) -> SideOrders | None:
    """The orders in a process's hidden side options (``option``: a value by argparse
    destination, None when not given); None without ``--mxperf-side-out`` (the others are then
    ignored: the process is no side).

    :raises OptionError: a value it cannot take, naming the option (``mxperf: invalid value``).
    """
    out = option(dest(OUT))
    if not out:
        return None

    def text(flag: str) -> str | None:
        value = option(dest(flag))
        return str(value) if value else None

    def parsed(flag: str, parse: Callable[[str], Any]) -> Any:
        raw = text(flag)
        if raw is None:
            return None
        try:
            return parse(raw)
        except ValueError as exc:
            raise OptionError(
                f"mxperf: invalid value {raw!r} for command line option {flag}: {exc}"
            ) from None

    return SideOrders(
        out=Path(str(out)),
        select=parsed(SELECT, Path),
        profile=bool(option(dest(PROFILE))),
        turns=parsed(TURNS, parse_turns),
        spread=parsed(SPREAD, cpus.members),
        plan=parsed(PLAN, Path),
        reuse=parsed(REUSE, Path),
    )
