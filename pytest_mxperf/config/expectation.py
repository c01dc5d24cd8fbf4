"""What a marker expects of a case, each figure with the hardware, model, mode and dtype it
applies to: an images/sec floor (`Expectation`), a data-parallel efficiency floor
(`EfficiencyFloor`)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class Expectation:
    """One expected images/sec figure with the scope it applies to."""

    images_per_sec: float
    batch_size: int
    hardware: str = "*"
    tolerance: float | None = None
    model: str | None = None
    mode: str | None = None
    dtype: str | None = None

    def applies(self, *, model: str, mode: str, dtype: str, batch_size: int, hardware: str) -> bool:
        return (
            self.batch_size == batch_size
            and (self.model is None or self.model == model)
            and (self.mode is None or self.mode == mode)
            and (self.dtype is None or self.dtype == dtype)
            and fnmatch.fnmatchcase(hardware.lower(), self.hardware.lower())
        )

    def floor(self, default_tolerance: float) -> float:
        tol = default_tolerance if self.tolerance is None else self.tolerance
        return self.images_per_sec * (1 - tol)


@dataclass(frozen=True)
class EfficiencyFloor:
    """The lowest scaling efficiency a data-parallel case of ``world_size`` may reach."""

    world_size: int
    floor: float
    hardware: str = "*"
    model: str | None = None

    def applies(self, *, model: str, world_size: int, hardware: str) -> bool:
        return (
            self.world_size == world_size
            and (self.model is None or self.model == model)
            and fnmatch.fnmatchcase(hardware.lower(), self.hardware.lower())
        )
