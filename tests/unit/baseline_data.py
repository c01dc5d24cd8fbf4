"""Records of stored baselines for the unit tests of the baselines wing (store and resolution):
a hardware key, commit shas, and builders of a commit record and a stored case."""

from __future__ import annotations

from typing import Any

HW = "cpu-amd-epyc-2c"
SHA_A = "a" * 40
SHA_B = "b" * 40
SHA_C = "c" * 40
SHA_D = "d" * 40


def commit(sha: str, date: str = "2024-01-01T00:00:00+00:00", **extra: Any) -> dict[str, Any]:
    return {"sha": sha, "date": date, "branch": "main", "dirty": False, **extra}


def rec(rate: float | None, **extra: Any) -> dict[str, Any]:
    return {"images_per_sec": rate, "rel_iqr": 0.01, "status": "ok" if rate else "oom", **extra}
