"""The input-bound verdict: end-to-end training measurably below the model alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.verdicts import Finding, Outcome

#: End-to-end below the model alone by more than this many times the noise is input-bound.
NOISE_FACTOR = 2.0
#: ... and by at least this much, whatever the noise.
MIN_GAP = 0.05


@dataclass(frozen=True)
class Figure:
    """One figure measured beside a case (the model alone, the pipeline alone)."""

    images_per_sec: float
    rel_iqr: float

    @classmethod
    def of(cls, m: Measurement) -> Figure:
        return cls(m.items_per_sec, m.rel_iqr)

    def as_dict(self) -> dict[str, float]:
        return {"images_per_sec": self.images_per_sec, "rel_iqr": self.rel_iqr}


# the input-bound verdict ------------------------------------------------------------------------
@dataclass(frozen=True)
class InputBound:
    """End-to-end training measured below the model alone by more than the noise."""

    end_to_end: float
    model_alone: float
    pipeline_alone: float | None
    gap: float
    threshold: float

    @property
    def needed_speedup(self) -> float:
        """How much faster the pipeline must become to feed the model (0.3 = 30% faster)."""
        have = self.pipeline_alone or self.end_to_end
        return self.model_alone / have - 1


def decide_input_bound(
    end_to_end: Measurement, model_alone: Figure, pipeline_alone: Figure | None
) -> InputBound | None:
    """Input-bound when end-to-end img/s is below the model alone's by more than
    ``max(MIN_GAP, NOISE_FACTOR x noise)`` (noise: the larger block spread of the two) and the
    pipeline alone does not deliver clearly more than the model consumes. A fast pipeline that
    still costs end-to-end throughput shares the CPU with the model: more decoding threads
    would not help, so that is not called input-bound."""
    noise = max(end_to_end.rel_iqr, model_alone.rel_iqr)
    threshold = max(MIN_GAP, NOISE_FACTOR * noise)
    gap = 1 - end_to_end.items_per_sec / model_alone.images_per_sec
    if gap <= threshold:
        return None
    if pipeline_alone is not None and pipeline_alone.images_per_sec > model_alone.images_per_sec * (
        1 + threshold
    ):
        return None
    return InputBound(
        end_to_end=end_to_end.items_per_sec,
        model_alone=model_alone.images_per_sec,
        pipeline_alone=None if pipeline_alone is None else pipeline_alone.images_per_sec,
        gap=gap,
        threshold=threshold,
    )


def explain_input_bound(
    key: CaseKey, bound: InputBound, points: Sequence[tuple[str, float | None]] = ()
) -> str:
    """The input-bound message: both figures, how much faster the pipeline must become, and
    which swept setting (``points``: name, pipeline img/s) gets there."""
    lines = [
        f"{key}: input-bound: end-to-end {bound.end_to_end:.1f} img/s vs the model alone "
        f"{bound.model_alone:.1f} img/s on synthetic data ({-bound.gap:+.1%}, beyond the "
        f"noise threshold {bound.threshold:.1%})"
    ]
    have = (
        f"the pipeline alone delivers {bound.pipeline_alone:.1f} img/s"
        if bound.pipeline_alone is not None
        else f"end-to-end reaches {bound.end_to_end:.1f} img/s"
    )
    lines.append(
        f"{have}: it must become {bound.needed_speedup:.0%} faster (>= {bound.model_alone:.1f} "
        "img/s, more where decoding and the model share the same cores) to feed the model"
    )
    measured = [(n, r) for n, r in points if r is not None]
    if measured:
        enough = [n for n, r in measured if r >= bound.model_alone]
        table = ", ".join(f"{n}: {r:.1f}" for n, r in measured)
        if enough:
            lines.append(f"swept pipeline img/s: {table}; {enough[0]} is enough")
        else:
            best = max(measured, key=lambda p: p[1])
            lines.append(
                f"swept pipeline img/s: {table}; none is enough (best {best[0]}): more "
                "threads/workers than swept, or less work per image, are needed"
            )
    elif points:
        lines.append("no swept setting could be measured")
    else:
        lines.append(
            "sweep preprocess_threads (ImageRecordIter) or num_workers (DataLoader) with "
            "sweep={...} to see which setting gets there"
        )
    return "\n".join(lines)


def input_bound_finding(
    key: CaseKey, bound: InputBound, points: Sequence[tuple[str, float | None]] = ()
) -> Finding:
    """The input-bound diagnosis as the part the case's verdict is built with: its message
    (`explain_input_bound`) leads a verdict that held, whose outcome becomes ``input-bound``
    (failing only when that verdict failed: ``--mxperf-strict`` on a new case); a baseline
    regression (or any failure) stands, with the diagnosis added."""
    return Finding(explain_input_bound(key, bound, points), Outcome.INPUT_BOUND)
