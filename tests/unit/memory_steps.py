"""A step's peak memory measured around a few steps: the tests' use of `MemoryProbe` (the plugin
brackets a whole case with it, `pytest_mxperf.measuring.diagnosis`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pytest_mxperf.measuring.memory import PROC_SELF, MemoryProbe, MemoryRecord

Step = Callable[[], object]
Sync = Callable[[], object]


def measure_peak_memory(
    step: Step,
    sync: Sync,
    steps: int = 3,
    *,
    device: str = "cpu",
    device_id: int = 0,
    mx: Any = None,
    proc: Path = PROC_SELF,
) -> MemoryRecord:
    """Run ``steps`` steps (then ``sync``) inside a :class:`MemoryProbe` and return its record.

    Call it on a freshly prepared step to see what the first steps allocate, or on a warm one
    to see what each step needs beyond the memory it keeps.
    """
    probe = MemoryProbe(device=device, device_id=device_id, mx=mx, proc=proc).start()
    for _ in range(steps):
        step()
    sync()
    return probe.stop()
