"""Replay recorded paired rounds through today's decision: how often identical code passes, and
how often a loss put into HEAD's blocks is caught, without measuring anything.

Reads the JSON reports of paired runs (``pytest --mxperf --mxperf-ab REV --mxperf-json F``; their
``paired.rounds`` keep every block both sides timed in turns), or of stored-baseline runs whose
joint pair ran (``joint_pair.rounds``: a new host's, code unchanged but for a comment, is an A/A
recording too). Models and input pipelines are tallied apart; ``--pipelines own`` tries giving the
pipelines a round effect of their own, pooled over the run's pipelines (the product keeps them
apart). A replayed run is one report's cases judged together, as a paired run judges them (the
run's round effect is pooled over its cases, `roundeffect.round_noise`): each case's first two
rounds are two of its recorded ones drawn at random without replacement, later ones drawn with
replacement; each round's block pairs are taken as the lock-step controller would (`turns.PAIRS`,
then two more at a time while the round's error is above `turns.TARGET_SE`, within what was
recorded); rounds go on while `more_rounds` would give them (up to ``--max-rounds``). A loss is put
into HEAD's blocks either evenly (``uniform``) or in lumps (``lumpy``: one step in ``1/loss`` takes
twice as long, so a block holds it or not). Record A/A runs on a machine, then try a statistic or a
rule on them here before measuring again (``--no-pool``, ``--same-confidence``, ``--pairs`` ...);
record runs beside a noisy neighbour to see it under noise. A replay cannot time pairs that were
not recorded: where a loss would have bought a round more pairs than the recording holds, it
under-states what a live run catches (a lumpy 5% loss: 46-60% caught replayed on quiet rounds of
3-5 pairs, 10 of 10 measured live).

    python scripts/replay_pairs.py runs/*.json --losses 0,0.05 --kinds uniform,lumpy
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging.pairstats import Decision, PairedRound, paired_estimate
from pytest_mxperf.judging.roundeffect import round_noise
from pytest_mxperf.paired import more_rounds, turns


@dataclass(frozen=True)
class Recorded:
    """One recorded round of one case: both sides' block rates in turn order."""

    rev: tuple[float, ...]
    head: tuple[float, ...]
    steps_per_block: int


def load(path: Path) -> dict[str, list[Recorded]]:
    """The interleaved rounds of every case of one report, by case key."""
    data: dict[str, Any] = json.loads(path.read_text())
    rounds = (data.get("paired") or data.get("joint_pair") or {}).get("rounds") or []
    if not rounds:
        raise SystemExit(
            f"{path}: no paired rounds (a report of --mxperf-ab, or of a run whose joint pair ran,"
            " with --mxperf-json)"
        )
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


@dataclass(frozen=True)
class Rule:
    """How many block pairs the lock-step controller times in a round (`turns`' constants)."""

    pairs: int = turns.PAIRS
    max_pairs: int = turns.MAX_PAIRS
    target_se: float = turns.TARGET_SE


def is_pipeline(key: str) -> bool:
    """Whether a case key is an input pipeline's, as `pairdata.PairedData.paired_rounds` tells."""
    return CaseKey.parse(key).mode == "pipeline"


def as_controller(
    rev: tuple[float, ...], head: tuple[float, ...], rule: Rule = Rule(), pooled: bool = True
) -> PairedRound:
    """The pairs the lock-step controller would have stopped at, within those recorded."""
    n = min(rule.pairs, len(rev))
    while True:
        extra = turns.more_pairs(rev[:n], head[:n], rule.pairs, rule.max_pairs, rule.target_se)
        if not extra or n + extra > len(rev):
            break
        n += extra
    return PairedRound(100.0, 100.0, pairs=tuple(zip(rev[:n], head[:n])), pooled=pooled)


@dataclass(frozen=True)
class Judge:
    """How the replayed rounds are judged: the controller's pairs and the decision's settings."""

    rule: Rule = Rule()
    max_rounds: int = 10
    pool: bool = True
    #: None: the product's rule (`pairstats.default_same_level`).
    same_confidence: float | None = None
    #: Input pipelines' rounds: "apart" (neither give nor take a round effect) or "own" (a
    #: round effect of their own, pooled over the run's pipelines only).
    pipelines: str = "apart"


def one_run(
    recorded: dict[str, list[Recorded]],
    loss: float,
    kind: str,
    rng: random.Random,
    judge: Judge = Judge(),
) -> list[tuple[Decision, int, int, bool]]:
    """One replayed paired run of one report's cases: per case its decision, the rounds it took,
    the block pairs they timed and whether it is an input pipeline."""

    own = judge.pipelines == "own"

    def draw(key: str, rnd: Recorded) -> PairedRound:
        pooled = own or not is_pipeline(key)
        return as_controller(rnd.rev, with_loss(rnd, loss, kind, rng), judge.rule, pooled)

    used = {
        key: [draw(key, r) for r in rng.sample(rounds, 2)]
        for key, rounds in recorded.items()
        if len(rounds) >= 2
    }
    out: dict[str, tuple[Decision, int, int]] = {}
    while len(out) < len(used):
        groups = {
            group: round_noise(r for k, r in used.items() if is_pipeline(k) == group)
            if judge.pool
            else None
            for group in (False, True)
        }
        for key, rounds in used.items():
            if key in out:
                continue
            pooled = groups[is_pipeline(key)]
            est = paired_estimate(rounds, pooled=pooled, same_confidence=judge.same_confidence)
            left = judge.max_rounds - len(rounds)
            if (
                est.decision is not Decision.UNKNOWN
                or left <= 0
                or not more_rounds.worth_another_round(est, left, judge.max_rounds, False)
            ):
                out[key] = (est.decision, len(rounds), sum(len(r.pairs) for r in rounds))
            else:
                rounds.append(draw(key, rng.choice(recorded[key])))
    return [(*out[key], is_pipeline(key)) for key in used]


@dataclass
class Tally:
    """What the replayed cases of one kind decided, and what it took."""

    said: Counter[str] = field(default_factory=Counter)
    rounds: int = 0
    pairs: int = 0
    cases: int = 0

    def add(self, decision: Decision, rounds: int, pairs: int) -> None:
        self.said[decision.value] += 1
        self.rounds += rounds
        self.pairs += pairs
        self.cases += 1

    def __str__(self) -> str:
        shares = ", ".join(f"{k} {v / self.cases:.1%}" for k, v in sorted(self.said.items()))
        return (
            f"{shares}; mean rounds {self.rounds / self.cases:.2f}, "
            f"block pairs per case {self.pairs / self.cases:.1f} ({self.cases} cases)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="JSON reports of paired runs")
    parser.add_argument("--losses", default="0,0.05,0.1", help="losses put into HEAD's blocks")
    parser.add_argument("--kinds", default="uniform,lumpy", help="uniform and/or lumpy")
    parser.add_argument("--runs", type=int, default=160, help="replayed runs per line (160)")
    parser.add_argument("--max-rounds", type=int, default=10, help="as --mxperf-max-rounds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-pool", action="store_true", help="no round effect pooled")
    parser.add_argument(
        "--pipelines",
        choices=("apart", "own"),
        default="apart",
        help="input pipelines: no round effect (apart, the product's) or one of their own",
    )
    parser.add_argument(
        "--same-confidence",
        type=float,
        default=None,
        help="one equivalence level for every case (default: pairstats.default_same_level's)",
    )
    parser.add_argument("--pairs", type=int, default=turns.PAIRS, help="as turns.PAIRS")
    parser.add_argument("--max-pairs", type=int, default=turns.MAX_PAIRS, help="as turns.MAX_PAIRS")
    parser.add_argument(
        "--target-se", type=float, default=turns.TARGET_SE, help="as turns.TARGET_SE"
    )
    args = parser.parse_args()
    if not 2 <= args.pairs <= args.max_pairs:
        raise SystemExit(
            f"--pairs {args.pairs} / --max-pairs {args.max_pairs}: need 2 <= pairs <= max"
        )
    if not args.target_se > 0:
        raise SystemExit(f"--target-se: {args.target_se} is not above 0")
    rule = Rule(args.pairs, args.max_pairs, args.target_se)
    if args.same_confidence is not None and not 0.0 < args.same_confidence < 1.0:
        raise SystemExit(f"--same-confidence: {args.same_confidence} is not in (0, 1)")
    runs = [cases for path in args.reports if (cases := load(path))]
    count = sum(1 for cases in runs for r in cases.values() if len(r) >= 2)
    if not count:
        raise SystemExit("no case was timed in turns in two rounds in these reports")
    judge = Judge(rule, args.max_rounds, not args.no_pool, args.same_confidence, args.pipelines)
    print(f"{len(runs)} run(s), {count} case(s) of two or more recorded rounds")
    for kind in args.kinds.split(","):
        if kind not in ("uniform", "lumpy"):
            raise SystemExit(f"--kinds: {kind!r} is neither uniform nor lumpy")
        for loss in (float(x) for x in args.losses.split(",")):
            if not 0.0 <= loss < 1.0:
                raise SystemExit(f"--losses: {loss} is not in [0, 1)")
            rng = random.Random(args.seed)
            tallies = {False: Tally(), True: Tally()}
            for i in range(args.runs):
                for decision, n, timed, pipeline in one_run(
                    runs[i % len(runs)], loss, kind, rng, judge
                ):
                    tallies[pipeline].add(decision, n, timed)
            label = "identical code" if loss == 0.0 else f"{kind} {loss:.0%} loss"
            for pipeline, tally in tallies.items():
                if tally.cases:
                    print(f"{label} ({'pipelines' if pipeline else 'models'}): {tally}")


if __name__ == "__main__":
    main()
