"""Expectation floors from a file: the images/sec a case should reach on matching hardware.

Two plain formats, neither of them executable:

- CSV with a header row; ``#`` lines are comments. Columns ``model``, ``batch_size`` and
  ``images_per_sec`` are required; ``hardware`` (a glob on the hardware key), ``mode`` and
  ``dtype`` are optional and match anything when absent or ``*``. Other columns are ignored, so
  ``tests/perf/expectations.csv`` (published MXNet figures) reads as it is. A cell ``OOM`` (the
  batch did not fit) is no floor; an interval ``LOW-HIGH`` (published as such) floors at LOW. A
  row whose ``devices`` is above 1 (or ``scaling`` is ``weak``/``strong``) is a figure of
  several devices, no floor for a case of one.
- JSON: a list of objects with the same fields, or ``{"floors": [...]}``.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ANY = "*"
#: Scaling kinds of a figure measured on several devices (``expectations.csv``'s ``scaling``).
SCALED = ("weak", "strong")
INTERVAL = re.compile(r"\d+(\.\d+)?-\d+(\.\d+)?")


class FloorError(Exception):
    """A floors file that cannot be used; the message names the file and the row."""


@dataclass(frozen=True)
class Floor:
    """Images/sec a case is expected to reach on hardware matching ``hardware`` (a glob)."""

    model: str
    batch_size: int
    images_per_sec: float
    hardware: str = ANY
    mode: str = ANY
    dtype: str = ANY
    source: str = ""

    def matches(self, hardware: str, model: str, mode: str, dtype: str, batch_size: int) -> bool:
        """Whether this floor applies to a case measured on ``hardware``."""
        return (
            self.model == model
            and self.batch_size == batch_size
            and fnmatch.fnmatchcase(hardware, self.hardware)
            and self.mode in (ANY, mode)
            and self.dtype in (ANY, dtype)
        )


def _floor(row: Mapping[str, Any], where: str) -> Floor | None:
    missing = [k for k in ("model", "batch_size", "images_per_sec") if row.get(k) in (None, "")]
    if missing:
        raise FloorError(f"{where}: missing {', '.join(missing)}")
    rate = row["images_per_sec"]
    if isinstance(rate, str) and rate.strip().upper() == "OOM":
        return None  # a published out-of-memory cell sets no floor
    if str(row.get("devices") or "1").strip() != "1" or row.get("scaling") in SCALED:
        return None  # a data-parallel figure: not one device's
    if isinstance(rate, str) and INTERVAL.fullmatch(rate.strip()):
        rate = rate.strip().split("-")[0]  # "9-10": at least 9
    try:
        value = float(rate)
        batch = int(row["batch_size"])
    except (TypeError, ValueError):
        raise FloorError(f"{where}: images_per_sec and batch_size must be numbers") from None
    if isinstance(rate, bool) or not math.isfinite(value) or value <= 0 or batch < 1:
        raise FloorError(f"{where}: images_per_sec must be > 0 and batch_size >= 1")

    def text(name: str) -> str:
        value = row.get(name)
        return ANY if value in (None, "") else str(value).strip()

    return Floor(
        model=str(row["model"]).strip(),
        batch_size=batch,
        images_per_sec=value,
        hardware=text("hardware"),
        mode=text("mode"),
        dtype=text("dtype"),
        source=str(row.get("table") or ""),
    )


def parse_csv(text: str, name: str = "<csv>") -> list[Floor]:
    """Floors from CSV text (see the module docstring)."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    body = [(n, line) for n, line in lines if not line.lstrip().startswith("#")]
    if not body:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(line for _, line in body)))
    floors = []
    for (lineno, _), row in zip(body[1:], reader):
        floor = _floor(row, f"{name}:{lineno}")
        if floor is not None:
            floors.append(floor)
    return floors


def parse_json(text: str, name: str = "<json>") -> list[Floor]:
    """Floors from JSON text: a list of objects, or ``{"floors": [...]}``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FloorError(f"{name} is not valid JSON ({exc})") from None
    if isinstance(data, dict):
        data = data.get("floors")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise FloorError(f"{name}: expected a list of objects or {{'floors': [...]}}")
    found = (_floor(row, f"{name}[{i}]") for i, row in enumerate(data))
    return [f for f in found if f is not None]


def load(path: Path) -> list[Floor]:
    """Floors from a ``.json`` file, or from CSV for any other name."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FloorError(f"cannot read floors file {path}: {exc.strerror}") from None
    if path.suffix.lower() == ".json":
        return parse_json(text, str(path))
    return parse_csv(text, str(path))


def floor_for(
    floors: Iterable[Floor], hardware: str, model: str, mode: str, dtype: str, batch_size: int
) -> float | None:
    """The highest floor that applies to a case, or None."""
    values = [
        f.images_per_sec for f in floors if f.matches(hardware, model, mode, dtype, batch_size)
    ]
    return max(values) if values else None
