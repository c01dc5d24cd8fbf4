"""A paired run's rounds as the JSON report records them: each side's figures, blocks and errors
per round."""

from __future__ import annotations

from typing import Any

from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.paired.pairdata import HEAD, REV, PairedData, SideResult


def as_dict(data: PairedData) -> dict[str, Any]:
    """Every round of a paired run, for the JSON report."""
    return {
        "rev": data.rev_label,
        "rev_sha": data.rev_sha,
        "cpus": data.cpus or None,
        "rounds": [_round_dict(r) for r in data.rounds],
        # Each round's wall seconds, both sides and their start-up included.
        "round_seconds": [round(x, 3) for x in data.round_seconds],
        "profile_rounds": [_round_dict(r) for r in data.profile_rounds],
        "budget_spent": data.budget_spent,
        # The second run of the cases this one found regressed, on fresh processes (its
        # estimates decide them): the same record, or None when none was needed.
        "confirmation": None if data.confirmation is None else as_dict(data.confirmation),
        # Per case, the rounds its own pair measured earlier in the run, counted as this
        # pair's first rounds of it (a joint pair that judged it again), in the same form.
        "earlier": {
            str(key): [
                _round_dict({REV: SideResult({key: a}), HEAD: SideResult({key: b})})
                for a, b in pairs
            ]
            for key, pairs in data.earlier.items()
        },
    }


def _round_dict(r: dict[str, SideResult]) -> dict[str, Any]:
    return {
        side: {
            "error": res.error,
            "collect_errors": [list(e) for e in res.collect_errors],
            "test_errors": dict(res.test_errors),
            "images_per_sec": {str(k): c.images_per_sec for k, c in res.cases.items()},
            # Seconds each case held the device on this side (build, warm-up, blocks).
            "seconds": {str(k): _held(c) for k, c in res.cases.items()},
            # Each block's img/s; "interleaved": timed in turns with the other side (lock-step),
            # block i of one side paired with block i of the other; "steps_per_block": the
            # same on both sides after the first round (`block_plan`).
            "blocks": {
                str(k): {
                    "images_per_sec": c.measurement.block_rates,
                    "interleaved": bool(c.measurement.extra.get("interleaved")),
                    "steps_per_block": c.measurement.steps_per_block,
                    # The warm-up before the blocks: its seconds, and whether it ended steady
                    # (False: it ran to --mxperf-warmup-time).
                    "warmup_seconds": round(c.measurement.warmup_seconds, 3),
                    "warmup_steady": c.measurement.warmup_steady,
                }
                for k, c in res.cases.items()
                if c.measurement is not None
            },
        }
        for side, res in r.items()
    }


def _held(case: CaseResult) -> float | None:
    if len(case.window) != 2:
        return None
    return round(case.window[1] - case.window[0], 3)
