"""An operator profile: per operator how often it ran and for how long, from MXNet's JSON table."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Aggregate categories that are MXNet operators (the other one, MXNET_C_API, counts C API calls
# whose number follows the Python code, not the model).
OPERATOR_CATEGORIES: tuple[str, ...] = ("operator",)


_TIME_UNITS_MS = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}


class ProfileUnavailable(RuntimeError):
    """The profiler could not produce a profile; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class OperatorStat:
    """One operator over a whole profile: how often it ran and its total time."""

    name: str
    category: str
    count: int
    total_ms: float


@dataclass(frozen=True)
class OperatorProfile:
    """Per-operator time of ``steps`` steps of one case (JSON-safe through ``as_dict``)."""

    operators: tuple[OperatorStat, ...]
    steps: int
    items_per_step: int
    # Largest device storage in use while profiling, per device ("cpu/0"), from the
    # profiler's memory category; empty when MXNet reported none.
    storage_max_kb: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.steps < 1 or self.items_per_step < 1:
            raise ValueError("a profile needs steps >= 1 and items_per_step >= 1")

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON data (for baseline files, reports and worker output)."""
        return {
            "steps": self.steps,
            "items_per_step": self.items_per_step,
            "operators": [
                {"name": o.name, "category": o.category, "count": o.count, "total_ms": o.total_ms}
                for o in self.operators
            ],
            "storage_max_kb": {device: kb for device, kb in self.storage_max_kb},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OperatorProfile:
        """Rebuild a profile from :meth:`as_dict` output; a bad field raises ``ValueError``."""
        try:
            operators = tuple(
                OperatorStat(
                    name=str(o["name"]),
                    category=str(o["category"]),
                    count=int(o["count"]),
                    total_ms=float(o["total_ms"]),
                )
                for o in data["operators"]
            )
            storage = data.get("storage_max_kb", {})
            return cls(
                operators=operators,
                steps=int(data["steps"]),
                items_per_step=int(data["items_per_step"]),
                storage_max_kb=tuple(sorted((str(k), float(v)) for k, v in storage.items())),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an operator profile: {exc!r}") from None


def parse_aggregate_json(text: str, *, steps: int, items_per_step: int) -> OperatorProfile:
    """Turn MXNet's ``dumps(format='json')`` text into an :class:`OperatorProfile`."""
    if not text.strip():
        raise ProfileUnavailable("the profiler returned no statistics (aggregate_stats off?)")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProfileUnavailable(f"the profiler's statistics are not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("Time", {}), dict):
        raise ProfileUnavailable("the profiler's statistics have no 'Time' section")
    units = data.get("Unit", {}) if isinstance(data.get("Unit"), dict) else {}
    unit = str(units.get("Time", "ms"))
    if unit not in _TIME_UNITS_MS:
        raise ProfileUnavailable(f"the profiler reports time in an unknown unit {unit!r}")
    scale = _TIME_UNITS_MS[unit]
    operators: list[OperatorStat] = []
    for category, ops in data.get("Time", {}).items():
        if not isinstance(ops, dict):
            continue
        for name, stat in ops.items():
            try:
                operators.append(
                    OperatorStat(
                        name=str(name),
                        category=str(category),
                        count=int(stat["Count"]),
                        total_ms=float(stat["Total"]) * scale,
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue  # an entry without Count/Total (MXNet adds none today) says nothing
    if not any(o.category in OPERATOR_CATEGORIES for o in operators):
        raise ProfileUnavailable("the profiler recorded no operators (did the step run any?)")
    storage: list[tuple[str, float]] = []
    for devices in (data.get("Memory") or {}).values():
        if isinstance(devices, dict):
            for device, stat in devices.items():
                if isinstance(stat, dict) and "Max" in stat:
                    storage.append((str(device).removeprefix("Memory: "), float(stat["Max"])))
    operators.sort(key=lambda o: (o.category, -o.total_ms, o.name))
    return OperatorProfile(tuple(operators), steps, items_per_step, tuple(sorted(storage)))
