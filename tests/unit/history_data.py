"""Synthetic history entries and paired reports for the history wing's tests."""

from __future__ import annotations

import math
from typing import Any

from pytest_mxperf.history.entries import Entry


def entry(
    commit: str,
    base: str,
    ratio: float = 1.0,
    *,
    case: str = "alpha/inference/float32/bs8/cpu",
    se: float = 0.01,
    run: str = "job",
) -> Entry:
    """An entry whose 95% interval gives ``log_se == se``."""
    half = 1.96 * se
    return Entry(
        case=case,
        commit=commit,
        base=base,
        ratio=ratio,
        low=ratio * math.exp(-half),
        high=ratio * math.exp(half),
        level=0.95,
        rounds=3,
        status="pass",
        run=run,
        hardware="cpu-test-2c",
    )


def paired_report(head: str, base: str, cases: dict[str, float]) -> dict[str, Any]:
    """A paired run's JSON report (the fields entries read) of ``cases`` (key: ratio)."""
    found = []
    for key, ratio in cases.items():
        low, high = ratio * 0.98, ratio * 1.02
        failed = ratio < 0.95
        level_text = (
            "99% interval" if failed else "99% interval -30.0% .. +30.0%, 2 round(s); 90% interval"
        )
        message = f"{key}: HEAD vs {base[:7]}: {ratio - 1:+.1%} ({level_text} {low - 1:+.1%} .. {high - 1:+.1%}, 3 round(s)): ..."
        found.append(
            {
                "key": key,
                "hardware": "cpu-test-2c",
                "software": {"mxnet": "1.9.1"},
                "calibration": None,
                "verdict": {
                    "status": "regressed" if failed else "pass",
                    "change": ratio - 1,
                    "interval": [low, high],
                    "rounds": 3,
                    "baseline_commit": base,
                    "message": message,
                },
            }
        )
    return {
        "schema": 1,
        "settings": {"ab": base},
        "paired": {"rev_sha": base},
        "run": {
            "cpu_hardware": "cpu-test-2c",
            "started": "2026-01-01T00:00:00+00:00",
            "commit": {"sha": head, "date": "2026-01-01T00:00:00+00:00"},
        },
        "cases": found,
    }
