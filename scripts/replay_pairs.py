"""Replay recorded paired rounds through today's decision: how often identical code passes, and
how often a loss put into HEAD's blocks is caught, without measuring anything.

Reads the JSON reports of paired runs (``pytest --mxperf --mxperf-ab REV --mxperf-json F``; their
``paired.rounds`` keep every block both sides timed in turns). For each case it draws rounds from
the case's recorded ones at random (with replacement), takes each round's block pairs as the
lock-step controller would (`turns.PAIRS`, then two more at a time while the round's error is
above `turns.TARGET_SE`, within what was recorded), and judges them as a paired run does: two
rounds, then more while `pairdata` would give them (up to ``--max-rounds``). A loss is put into
HEAD's blocks either evenly (``uniform``) or in lumps (``lumpy``: one step in ``1/loss`` takes
twice as long, so a block holds it or not). Record A/A runs on a machine, then try a statistic
or a rule on them here before measuring again; record runs beside a noisy neighbour to see it
under noise. A replay cannot time pairs that were not recorded: where a loss would have bought a
round more pairs than the recording holds, it under-states what a live run catches (a lumpy 5%
loss: 46-57% caught replayed on quiet rounds of 3-5 pairs, 10 of 10 measured live).

    python scripts/replay_pairs.py runs/*.json --losses 0,0.05 --kinds uniform,lumpy
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mxperf.judging.pairstats import Decision, PairedRound, paired_estimate
from pytest_mxperf.measuring.stats import paired_blocks
from pytest_mxperf.paired import pairdata, turns


@dataclass(frozen=True)
class Recorded:
    """One recorded round of one case: both sides' block rates in turn order."""

    rev: tuple[float, ...]
    head: tuple[float, ...]
    steps_per_block: int


def load(path: Path) -> dict[str, list[Recorded]]:
    """The interleaved rounds of every case of one report, by case key."""
    data: dict[str, Any] = json.loads(path.read_text())
    rounds = (data.get("paired") or {}).get("rounds") or []
    if not rounds:
        raise SystemExit(f"{path}: no paired rounds (a report of --mxperf-ab with --mxperf-json)")
    out: dict[str, list[Recorded]] = {}
    for rnd in rounds:
        for key, head in rnd["head"]["blocks"].items():
            rev = rnd["rev"]["blocks"].get(key)
            if not rev or not (head.get("interleaved") and rev.get("interleaved")):
                continue
            n = min(len(rev["images_per_sec"]), len(head["images_per_sec"]))
            if n >= 2:
                out.setdefault(key, []).append(
                    Recorded(
                        tuple(rev["images_per_sec"][:n]),
                        tuple(head["images_per_sec"][:n]),
                        int(head["steps_per_block"]),
                    )
                )
    return out


def with_loss(rnd: Recorded, loss: float, kind: str, rng: random.Random) -> tuple[float, ...]:
    """HEAD's block rates with ``loss`` of its throughput taken, evenly or in lumps."""
    if loss == 0.0:
        return rnd.head
    if kind == "uniform":
        return tuple(h * (1.0 - loss) for h in rnd.head)
    extra_per_step, owed, out = loss / (1.0 - loss), rng.random(), []
    for rate in rnd.head:
        doubled = 0
        for _ in range(rnd.steps_per_block):
            owed += extra_per_step
            doubled += int(owed)
            owed -= int(owed)
        out.append(rate * rnd.steps_per_block / (rnd.steps_per_block + doubled))
    return tuple(out)


def as_controller(rev: tuple[float, ...], head: tuple[float, ...]) -> PairedRound:
    """The pairs the lock-step controller would have stopped at, within those recorded."""
    n = min(turns.PAIRS, len(rev))
    while n + 2 <= min(len(rev), turns.MAX_PAIRS) and (
        paired_blocks(rev[:n], head[:n]).se > turns.TARGET_SE
    ):
        n += 2
    return PairedRound(100.0, 100.0, pairs=tuple(zip(rev[:n], head[:n])))


def one_case(
    recorded: list[Recorded], loss: float, kind: str, max_rounds: int, rng: random.Random
) -> tuple[Decision, int]:
    """One replayed paired run of one case: its decision and the rounds it took."""
    used: list[PairedRound] = []
    while True:
        rnd = rng.choice(recorded)
        used.append(as_controller(rnd.rev, with_loss(rnd, loss, kind, rng)))
        if len(used) < 2:
            continue
        est = paired_estimate(used)
        if est.decision is not Decision.UNKNOWN or len(used) >= max_rounds:
            return est.decision, len(used)
        if not pairdata.worth_another_round(est, max_rounds - len(used), max_rounds, False):
            return est.decision, len(used)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="JSON reports of paired runs")
    parser.add_argument("--losses", default="0,0.05,0.1", help="losses put into HEAD's blocks")
    parser.add_argument("--kinds", default="uniform,lumpy", help="uniform and/or lumpy")
    parser.add_argument("--runs", type=int, default=600, help="replayed runs per line (600)")
    parser.add_argument("--max-rounds", type=int, default=10, help="as --mxperf-max-rounds")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    cases = [r for path in args.reports for r in load(path).values()]
    if not cases:
        raise SystemExit("no case was timed in turns in these reports")
    print(f"{len(cases)} case(s), {sum(map(len, cases))} recorded round(s)")
    for kind in args.kinds.split(","):
        if kind not in ("uniform", "lumpy"):
            raise SystemExit(f"--kinds: {kind!r} is neither uniform nor lumpy")
        for loss in (float(x) for x in args.losses.split(",")):
            if not 0.0 <= loss < 1.0:
                raise SystemExit(f"--losses: {loss} is not in [0, 1)")
            rng = random.Random(args.seed)
            said: Counter[str] = Counter()
            rounds = 0
            for i in range(args.runs):
                decision, n = one_case(cases[i % len(cases)], loss, kind, args.max_rounds, rng)
                said[decision.value] += 1
                rounds += n
            shares = ", ".join(f"{k} {v / args.runs:.1%}" for k, v in sorted(said.items()))
            label = "identical code" if loss == 0.0 else f"{kind} {loss:.0%} loss"
            print(f"{label}: {shares}; mean rounds {rounds / args.runs:.2f}")


if __name__ == "__main__":
    main()
