"""Results gathered on the controller from every test report (with or without xdist), and what
a collection error says about the user's file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.system import codec


@dataclass
class Collected:
    """Results gathered on the controller from every test report (with or without xdist)."""

    results: list[CaseResult] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)

    def add(self, data: dict[str, Any]) -> CaseResult:
        result = codec.from_dict(CaseResult, data)
        for other in self.results:
            if other.key == result.key:
                self.duplicates.append(
                    f"case key {str(result.key)!r} measured twice: {other.nodeid} and "
                    f"{result.nodeid}"
                )
        self.results.append(result)
        return result

    def replace(self, result: CaseResult) -> None:
        """Put ``result`` in place of the one collected with its key (judged again after its
        test: `pytest_mxperf.case.jointpair`); added when there is none."""
        for i, other in enumerate(self.results):
            if other.key == result.key:
                self.results[i] = result
                return
        self.results.append(result)


def collect_error_text(text: str, lines: int = 15) -> str:
    """What a collection error says about the user's file: pytest's error lines (``E ...``)
    when it has them, else its last ``lines`` lines; never frames of Python's import machinery
    (``<frozen importlib._bootstrap>`` and their ``???``), which say nothing about it."""
    kept = [
        line
        for line in text.strip().splitlines()
        if "<frozen importlib" not in line and line.strip() != "???"
    ]
    errors = [line for line in kept if line.startswith("E ")]
    return "\n".join((errors or kept)[-lines:])
