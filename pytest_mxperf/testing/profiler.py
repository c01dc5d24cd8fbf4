"""Fakes of what diagnosis reads of MXNet for `pytest_mxperf.testing.FakeBackend`: its profiler
module (aggregate statistics and trace events) and the peak-memory probe."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from pytest_mxperf.measuring.memory import MemoryMethod, MemoryRecord


class FakeMemoryProbe:
    """Reports the peak memory the prepared `FakeModel` declares (``peak_mb`` reads it)."""

    def __init__(self, peak_mb: Callable[[], float], device: str) -> None:
        self.peak_mb, self.device = peak_mb, device

    def start(self) -> FakeMemoryProbe:
        return self

    def stop(self) -> MemoryRecord:
        return MemoryRecord(self.peak_mb(), MemoryMethod.DECLARED, self.device)


class FakeProfiler:
    """MXNet 1.9.1's profiler calls on a `FakeBackend`: aggregate statistics in its JSON
    layout (``Time -> operator -> name -> {Count, Total}``) and trace events written to the
    configured file on ``dumps``. ``fail`` makes every call raise it (a build without the
    profiler, a broken one)."""

    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.log = log
        self.running = False
        self.filename: str | None = None
        self.fail: Exception | None = None
        self._stats: dict[str, list[float]] = {}
        self._events: list[dict[str, Any]] = []
        self._dumped = False

    def _call(self, what: str) -> None:
        self.log.append(("profiler", what))
        if self.fail is not None:
            raise self.fail

    def set_config(self, **kwargs: Any) -> None:
        self._call("set_config")
        self.filename = str(kwargs.get("filename", "profile.json"))

    def set_state(self, state: str = "stop") -> None:
        self._call(f"set_state({state})")
        self.running = state == "run"

    def record(self, operators: dict[str, tuple[int, float]], seconds: float) -> None:
        """One profiled step: every operator ran ``count`` times in its share of the time."""
        for name, (count, share) in operators.items():
            stat = self._stats.setdefault(name, [0, 0.0])
            stat[0] += count
            stat[1] += share * seconds * 1000.0
            ts = len(self._events)
            self._events.append(
                {"name": name, "cat": "operator", "ph": "X", "ts": ts, "dur": 1, "pid": 0}
            )

    def dumps(self, reset: bool = False, format: str = "table") -> str:
        self._call(f"dumps({format})")
        if self.filename is not None and self._events:
            with open(self.filename, "a", encoding="utf-8") as f:
                head = "" if self._dumped else '{"traceEvents": [\n'
                f.write(head + ",\n".join(json.dumps(e) for e in self._events) + ",\n")
            self._dumped = True
            self._events = []
        if format == "json":
            ops = {n: {"Count": int(c), "Total": t} for n, (c, t) in self._stats.items()}
            text = json.dumps({"Time": {"operator": ops}, "Unit": {"Time": "ms"}})
        else:
            text = "\n".join(f"{n} {int(c)} {t:.4f}" for n, (c, t) in self._stats.items())
        if reset:
            self._stats = {}
        return text


@dataclass
class FakeMXNet:
    """What the profiling code reads of the ``mxnet`` module: ``profiler``."""

    profiler: FakeProfiler
