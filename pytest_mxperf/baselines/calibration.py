"""The calibration a baseline file carries: how fast the machine that stored it ran one small
fixed network (`pytest_mxperf.backend.calibration`), so a run can tell before its first case
whether the file's figures describe this machine.

Stored as ``"calibration": {"probe": ..., "images_per_sec": ..., "runs": [...]}`` beside the
cases, the last few runs kept as a case keeps its runs. A file without it (older files), or
with another probe's figure, has no calibration: its cases are judged one by one as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pytest_mxperf.measuring.stats import median

#: The probe this version measures; a stored figure of another probe is not comparable.
PROBE = "convs8-c32-32px-bs8-inference"
#: Runs of the probe a file keeps (as `kept_runs.RUNS_KEPT` for cases).
RUNS_KEPT = 5


class CalibrationError(ValueError):
    """A ``calibration`` object that cannot be read; the message names the field."""


@dataclass(frozen=True)
class Calibration:
    """The probe's images/sec on the machine that stored a file: the median of its runs."""

    probe: str
    runs: tuple[float, ...]

    @property
    def images_per_sec(self) -> float:
        return median(self.runs)

    def comparable(self) -> bool:
        """Measured with the probe this version measures."""
        return self.probe == PROBE

    def with_run(self, images_per_sec: float) -> Calibration:
        """This record with one more run (the oldest dropped beyond `RUNS_KEPT`); a record of
        another probe is replaced."""
        runs = self.runs if self.comparable() else ()
        return Calibration(PROBE, (*runs, images_per_sec)[-RUNS_KEPT:])

    def as_dict(self) -> dict[str, Any]:
        return {"probe": self.probe, "images_per_sec": self.images_per_sec, "runs": list(self.runs)}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Calibration | None:
        """The record of a file's ``calibration`` field (None: the field is absent)."""
        if data is None:
            return None
        if not isinstance(data, dict):
            raise CalibrationError(f"{where}: 'calibration' must be an object, got {data!r}")
        probe, runs = data.get("probe"), data.get("runs")
        if not isinstance(probe, str) or not probe:
            raise CalibrationError(f"{where}: 'calibration.probe' must be a name, got {probe!r}")
        if not isinstance(runs, list) or not runs:
            raise CalibrationError(f"{where}: 'calibration.runs' must be a list of numbers")
        for r in runs:
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r):
                raise CalibrationError(f"{where}: 'calibration.runs' holds {r!r}, not a number")
            if r <= 0:
                raise CalibrationError(f"{where}: 'calibration.runs' holds {r!r}, not > 0")
        return cls(probe, tuple(float(r) for r in runs))


def first(images_per_sec: float) -> Calibration:
    """The record of a file's first calibration run."""
    return Calibration(PROBE, (images_per_sec,))
