"""The peak memory a case's steps need, and the verdict arithmetic on it.

CPU: Linux keeps a resident-set high-water mark per process (``VmHWM`` in
``/proc/self/status``) and resets it to the current resident set when "5" is written to
``/proc/self/clear_refs``. Reset, run the steps, read the mark: the peak of exactly that window,
with nothing running inside the steps (the kernel keeps the mark). Where the reset is refused
(some containers, non-Linux), the record says which weaker method was used.

GPU: ``mx.context.gpu_memory_info(device_id)`` (free, total bytes) before and after the steps.
MXNet's GPU memory pool keeps what it allocated, so "after" is close to the pool's peak; other
processes on the same GPU move the figure too. Written from MXNet's documented API; not tried
here (no GPU).

Run it outside timed blocks: around prepare + the first steps (where memory is allocated), or
around a few warm steps.
"""

from __future__ import annotations

import ctypes
import enum
import gc
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

Step = Callable[[], object]
Sync = Callable[[], object]

_MIB = 1024.0 * 1024.0
PROC_SELF = Path("/proc/self")


class MemoryMethod(str, enum.Enum):
    """How a peak was obtained, from exact to rough."""

    #: VmHWM reset before the window and read after it: the exact peak of the window.
    VMHWM = "vmhwm"
    #: VmHWM could not be reset, but it rose during the window, so its new value is the
    #: window's peak.
    VMHWM_RISE = "vmhwm-rise"
    #: Resident set sampled before and after: misses memory freed before the end of the window.
    RSS = "rss"
    #: GPU memory in use before and after (``mx.context.gpu_memory_info``).
    GPU_MEMORY_INFO = "gpu_memory_info"
    #: A figure a test back end declares (`pytest_mxperf.testing.FakeModel.memory_mb`).
    DECLARED = "declared"


@dataclass(frozen=True)
class MemoryRecord:
    """The memory a case's steps needed (MiB), how it was measured and on which device.

    ``peak_mb`` is the peak above what was resident when the window began, so it does not
    count the interpreter, MXNet's libraries or earlier cases. ``process_peak_mb`` is the
    process's whole high-water mark (CPU methods that know it).
    """

    peak_mb: float
    method: MemoryMethod
    device: str
    process_peak_mb: float | None = None


# CPU ------------------------------------------------------------------------------------------
def read_status_kb(proc: Path = PROC_SELF) -> dict[str, int]:
    """The ``Vm*`` sizes of ``proc``/status (``VmRSS``, ``VmHWM``, ``VmSize``, ...) in kB
    (empty where there is no /proc)."""
    try:
        text = (proc / "status").read_text()
    except OSError:
        return {}
    return {name: int(kb) for name, kb in re.findall(r"^(Vm\w+):\s+(\d+)\s+kB", text, re.M)}


def release_free_memory() -> bool:
    """Collect Python's garbage and give the C allocator's free pages back to the system
    (glibc's ``malloc_trim``); False where there is no ``malloc_trim`` (not glibc).

    What earlier cases freed but the allocator kept stays resident; a case then reuses it
    without raising the resident set, so its peak depends on what ran before and on when the
    garbage collector last ran. Two processes running the same cases measured the same case's
    peak at 3.4 and 123.5 MiB. Released first, every case's peak counts the pages it touches.
    """
    gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # no malloc_trim; Windows refuses CDLL(None)
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)
    return True


def reset_peak(proc: Path = PROC_SELF) -> bool:
    """Reset the process's VmHWM to its current resident set; False where that is refused."""
    try:
        with (proc / "clear_refs").open("w") as f:
            f.write("5")
    except OSError:
        return False
    return True


@dataclass
class MemoryProbe:
    """Brackets a window of work: ``start()`` before it, ``stop()`` after it gives the record.

    ``device`` is ``"cpu"`` or ``"gpu"``; a GPU probe needs ``mx`` (the mxnet module).
    """

    device: str = "cpu"
    device_id: int = 0
    mx: Any = None
    proc: Path = PROC_SELF
    # What start() saw; not constructor arguments.
    _rss_kb: int | None = field(default=None, init=False, repr=False)
    _hwm_kb: int | None = field(default=None, init=False, repr=False)
    _reset: bool = field(default=False, init=False, repr=False)
    _gpu_used: int | None = field(default=None, init=False, repr=False)

    def start(self) -> MemoryProbe:
        if self.device == "gpu":
            self._gpu_used = self._gpu_in_use()
            return self
        release_free_memory()
        self._reset = reset_peak(self.proc)
        status = read_status_kb(self.proc)
        self._rss_kb = status.get("VmRSS")
        self._hwm_kb = status.get("VmHWM")
        return self

    def stop(self) -> MemoryRecord:
        if self.device == "gpu":
            if self._gpu_used is None:
                raise RuntimeError("MemoryProbe.stop() before start()")
            used = self._gpu_in_use()
            return MemoryRecord(
                max(used - self._gpu_used, 0) / _MIB,
                MemoryMethod.GPU_MEMORY_INFO,
                f"gpu:{self.device_id}",
            )
        if self._rss_kb is None:
            raise RuntimeError("no resident-set figures here (MemoryProbe needs Linux /proc)")
        status = read_status_kb(self.proc)
        rss, hwm = status.get("VmRSS", self._rss_kb), status.get("VmHWM")
        if hwm is not None and self._reset:
            method, peak_kb = MemoryMethod.VMHWM, hwm
        elif hwm is not None and self._hwm_kb is not None and hwm > self._hwm_kb:
            method, peak_kb = MemoryMethod.VMHWM_RISE, hwm
        else:
            method, peak_kb = MemoryMethod.RSS, max(rss, self._rss_kb)
        return MemoryRecord(
            max(peak_kb - self._rss_kb, 0) / 1024.0,
            method,
            "cpu",
            process_peak_mb=hwm / 1024.0
            if hwm is not None and method != MemoryMethod.RSS
            else None,
        )

    def _gpu_in_use(self) -> int:
        if self.mx is None:
            raise ValueError("a GPU memory probe needs the mxnet module (mx=...)")
        free, total = self.mx.context.gpu_memory_info(self.device_id)
        return int(total) - int(free)


# verdict arithmetic ---------------------------------------------------------------------------
class MemoryTrend(str, enum.Enum):
    """Memory now against the baseline."""

    GREW = "grew"
    SAME = "same"
    SHRANK = "shrank"


@dataclass(frozen=True)
class MemoryChange:
    """The memory verdict of a case: ``trend`` and the numbers behind it."""

    trend: MemoryTrend
    base_mb: float
    now_mb: float
    tolerance: float
    floor_mb: float

    @property
    def change(self) -> float | None:
        """Relative change (0.25 = +25%); None when the baseline is zero."""
        return self.now_mb / self.base_mb - 1.0 if self.base_mb > 0 else None

    @property
    def message(self) -> str:
        pct = "" if self.change is None else f" ({self.change:+.0%})"
        return (
            f"peak memory {self.trend.value}: {self.base_mb:.1f} -> {self.now_mb:.1f} MiB{pct}, "
            f"tolerance {self.tolerance:.0%} and at least {self.floor_mb:g} MiB"
        )


def memory_change(
    base_mb: float, now_mb: float, tolerance: float = 0.10, floor_mb: float = 16.0
) -> MemoryChange:
    """Judge a peak against its baseline: a change counts when it exceeds both ``tolerance``
    (relative to the baseline) and ``floor_mb`` (allocator and page-cache noise of small
    figures)."""
    if tolerance < 0 or floor_mb < 0:
        raise ValueError("tolerance and floor_mb must be >= 0")
    delta = now_mb - base_mb
    big_enough = abs(delta) > max(tolerance * abs(base_mb), floor_mb)
    if big_enough and delta > 0:
        trend = MemoryTrend.GREW
    elif big_enough:
        trend = MemoryTrend.SHRANK
    else:
        trend = MemoryTrend.SAME
    return MemoryChange(trend, base_mb, now_mb, tolerance, floor_mb)
