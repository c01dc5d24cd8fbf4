"""A case's verdict: its outcome, the numbers that decided it, and the lines of the message a
user reads, written from them in one place (`render_message`); re-exported by `records`."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any


class Outcome(str, enum.Enum):
    """The verdict on a case (the ``verdict`` column)."""

    PASS = "pass"
    IMPROVED = "improved"
    REGRESSED = "regressed"
    #: The case's own measurements spread too much to judge against a stored figure.
    UNSTABLE = "unstable"
    #: A paired comparison that its rounds could not decide either way (the message says how
    #: many rounds would); it passes, and fails only with ``--mxperf-strict``.
    INCONCLUSIVE = "inconclusive"
    NEW = "new"
    BELOW = "below expectation"
    #: Looked regressed against a stored figure, but a paired run of the baseline commit's code
    #: on this machine measured the same: the stored figure does not hold here.
    MACHINE = "machine"
    #: End-to-end training below the model alone on synthetic data by more than the noise:
    #: a diagnosis, not a failure (never failed by ``--mxperf-strict`` on its own).
    INPUT_BOUND = "input-bound"
    #: Throughput held, but the case's peak memory grew beyond the tolerance with
    #: ``--mxperf-strict``, or is above the marker's ``max_memory_mb``.
    MEMORY = "memory"
    OOM = "oom"
    NAN = "nan"
    ERROR = "error"


def message_lines(text: str) -> tuple[str, ...]:
    """The lines of a message text (`render_message` gives the text back, byte for byte)."""
    return tuple(text.split("\n"))


def render_message(lines: tuple[str, ...]) -> str:
    """The one place a verdict's message is written from its lines."""
    return "\n".join(lines)


@dataclass(frozen=True)
class Verdict:
    """The decision on a case (numbers) and, once explained, the lines of the message a user
    reads: each step that explains more returns a new verdict with more lines (`adding`; a
    `Finding` goes above or below them), and `message` renders them (`render_message`), never
    stored as one text."""

    outcome: Outcome
    failed: bool
    #: The message's lines in reading order (the lead: case, change, threshold; then each
    #: explanation added since); ``("",)``: no message yet.
    lines: tuple[str, ...] = ("",)
    change: float | None = None
    threshold: float | None = None
    noise: float | None = None
    baseline_images_per_sec: float | None = None
    baseline_commit: str | None = None
    expected: float | None = None
    #: Paired evidence: the interval of HEAD/REV img/s that decided (a pass: the equivalence
    #: interval; else the 99% one), the level it was taken at (0.95 for a 95% interval; None
    #: in reports written before it was recorded), the degrees of freedom of its t quantile
    #: (its half-width in logs over that quantile is the estimate's standard error; None in
    #: reports written before it was recorded), and the rounds it rests on.
    interval: tuple[float, float] | None = None
    interval_level: float | None = None
    interval_df: int | None = None
    rounds: int | None = None
    #: Data-parallel cases: the stored efficiency at this world size, the relative change of
    #: the efficiency and its threshold, the marker's floor; ``scaling`` says the efficiency
    #: (not the aggregate img/s) decided the outcome.
    baseline_efficiency: float | None = None
    efficiency_change: float | None = None
    efficiency_threshold: float | None = None
    efficiency_floor: float | None = None
    baseline_comm_share: float | None = None
    scaling: bool = False
    #: Peak memory against the baseline: ``grew``/``same``/``shrank`` (None: not compared),
    #: the stored peak (MiB), and the marker's ceiling when one applies.
    memory_trend: str | None = None
    baseline_memory_mb: float | None = None
    max_memory_mb: float | None = None
    #: First step / warm-up figures that grew by a large factor since the baseline.
    startup: tuple[str, ...] = ()
    #: A pass that no paired run could check, below its stored figure beyond this machine's
    #: noise but within the floor for unconfirmed drops: what is said of it
    #: (`pytest_mxperf.case.pairs`).
    unconfirmed: str | None = None

    @property
    def status(self) -> str:
        """The outcome's text, as shown in tables and JSON."""
        return self.outcome.value

    @property
    def message(self) -> str:
        """The message a user reads, rendered from `lines`."""
        return render_message(self.lines)

    def explained(self, message: str) -> Verdict:
        """This verdict with ``message`` (one or more lines) as its whole message."""
        return replace(self, lines=message_lines(message))

    def adding(self, *texts: str) -> Verdict:
        """This verdict with ``texts`` (each one or more lines) below its message."""
        return replace(self, lines=self.lines + tuple(x for t in texts for x in message_lines(t)))

    def edge_out(self, data: dict[str, Any]) -> dict[str, Any]:
        """`pytest_mxperf.system.codec`: the edge holds the rendered message in place of the
        lines, and the outcome also as ``status`` (the field name JSON readers know)."""
        out = {
            ("message" if k == "lines" else k): (self.message if k == "lines" else v)
            for k, v in data.items()
        }
        out["status"] = self.outcome.value
        return out

    @classmethod
    def edge_in(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        """The lines from the message; the outcome from ``status`` where ``outcome`` is not."""
        back = {k: v for k, v in data.items() if k not in ("message", "status")}
        back["lines"] = message_lines(str(data.get("message") or ""))
        back["outcome"] = data.get("outcome", data.get("status"))
        return back


#: The outcomes of a verdict that held: a finding with an outcome of its own takes their place.
HELD = (Outcome.PASS, Outcome.NEW, Outcome.IMPROVED)


@dataclass(frozen=True)
class Finding:
    """What a step beside the judgement finds of a case (an end-to-end case found input-bound;
    a case judged again by the run's joint pair), a part its verdict is built with
    (`pytest_mxperf.case.evidence`): its text goes below the message or, with an ``outcome``
    and a verdict that held, above it, that outcome in place of the verdict's (a regression or
    any failure stands). It never fails a case."""

    text: str
    outcome: Outcome | None = None

    def placed(self, outcome: Outcome, lines: tuple[str, ...]) -> tuple[Outcome, tuple[str, ...]]:
        """A verdict's ``outcome`` and message ``lines`` with this finding."""
        if self.outcome is not None and outcome in HELD:
            return self.outcome, message_lines(self.text) + lines
        return outcome, lines + message_lines(self.text)


@dataclass(frozen=True)
class Judged:
    """A case's verdict on its way to the record: the decision (outcome and numbers), the lines
    of its message so far and, for a pass no paired run could check, what is said of it. The
    `Verdict` is built from these and the evidence once (`pytest_mxperf.case.evidence`)."""

    decision: Verdict
    lines: tuple[str, ...]
    unconfirmed: str | None = None

    @classmethod
    def of(cls, verdict: Verdict) -> Judged:
        """A verdict already built, as the parts it was built from."""
        return cls(verdict, verdict.lines, verdict.unconfirmed)

    def verdict(self) -> Verdict:
        """The verdict as it stands (before its evidence)."""
        return replace(self.decision, lines=self.lines, unconfirmed=self.unconfirmed)
