"""Case results and the verdict on each: compare with the expectation floor and the baseline.

A change smaller than the noise measured for the case is never a regression: the threshold is
the larger of the tolerance and twice the case's noise (the relative IQR of the current blocks,
of the baseline's blocks, and the spread of repeated baseline runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_mxperf.markers import Expectation
from pytest_mxperf.options import Settings
from pytest_mxperf.stats import rel_spread

PASS = "pass"
IMPROVED = "improved"
REGRESSED = "regressed"
UNSTABLE = "unstable"
NEW = "new"
BELOW = "below expectation"
OOM = "oom"
NAN = "nan"
ERROR = "error"

#: A measurement whose blocks spread more than this (IQR / median) is too noisy to judge.
MAX_REL_IQR = 0.25
#: The threshold is at least this many times the case's noise.
NOISE_FACTOR = 2.0
#: A threshold above this means the case cannot be judged at all.
MAX_THRESHOLD = 0.5


@dataclass
class CaseResult:
    """One measured case, as it travels on ``user_properties`` and into JSON and baselines."""

    key: str
    model: str
    mode: str
    dtype: str
    batch_size: int
    device: str
    device_kind: str
    hardware: str
    status: str = "ok"  # ok | oom | nan | error
    measurement: dict[str, Any] | None = None
    attempts: list[float] = field(default_factory=list)
    threads: dict[str, Any] = field(default_factory=dict)
    software: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    nodeid: str = ""
    #: Wall-clock (start, end) of the time this case held its device: build, warm-up, blocks.
    window: list[float] = field(default_factory=list)
    #: The xdist worker that measured the case (None in a serial run).
    worker: str | None = None
    verdict: dict[str, Any] | None = None

    @property
    def images_per_sec(self) -> float | None:
        """Median images/sec over the timed blocks (None for OOM/NaN/error)."""
        if self.measurement is None:
            return None
        return float(self.measurement["images_per_sec"])

    @property
    def rel_iqr(self) -> float:
        return 0.0 if self.measurement is None else float(self.measurement["rel_iqr"])

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class Verdict:
    status: str
    failed: bool
    message: str
    change: float | None = None
    threshold: float | None = None
    noise: float | None = None
    baseline_images_per_sec: float | None = None
    baseline_commit: str | None = None
    expected: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Policy:
    tolerance: float = Settings.tolerance  # one default: --mxperf-tolerance's
    strict: bool = False
    update: bool = False


def _fmt(rate: float | None) -> str:
    return "OOM" if rate is None else f"{rate:.1f} img/s"


def noise_of(result: CaseResult, baseline_case: dict[str, Any] | None) -> float:
    """The relative noise of a comparison: the largest of the block spreads (IQR / median) of
    the current run and of the baseline, and half the range of the baseline's repeated run
    medians (so the threshold, twice the noise, spans that whole range)."""
    parts = [result.rel_iqr]
    if baseline_case:
        parts.append(float(baseline_case.get("rel_iqr", 0.0)))
        runs = [float(r) for r in baseline_case.get("runs", []) if r]
        if len(runs) >= 2:
            parts.append(rel_spread(runs) / 2)
    return max(parts)


def diff_stack(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between two software/environment records, as ``name: old -> new``."""
    lines = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a != b:
            lines.append(f"{name}: {'unset' if a is None else a} -> {'unset' if b is None else b}")
    return lines


def judge(
    result: CaseResult,
    baseline: dict[str, Any] | None,
    expectations: list[Expectation],
    policy: Policy,
    elsewhere: Sequence[str] = (),
) -> Verdict:
    """Decide a case's verdict.

    :param baseline: the resolved baseline reference (``case``, ``commit``, ``distance``,
        ``how``) or None when the case has none.
    :param expectations: marker expectations that apply to this case on this hardware.
    :param elsewhere: other hardware keys that do hold a baseline of this case.
    """
    key = result.key
    rate = result.images_per_sec
    if result.status == NAN:
        return Verdict(NAN, True, f"{key}: {result.error}")
    if result.status == ERROR:
        return Verdict(ERROR, True, f"{key}: {result.error}")

    base_case = baseline["case"] if baseline else None
    base_rate = None if base_case is None else base_case.get("images_per_sec")
    commit = baseline["commit"] if baseline else {}
    base_where = ""
    if baseline:
        distance = baseline.get("distance")
        between = (
            f"{distance} commit(s) before HEAD"
            if distance is not None
            else f"chosen as {baseline.get('how', 'newest by date')}"
        )
        base_where = (
            f"baseline commit {str(commit.get('sha', '?'))[:10]} "
            f"({commit.get('date', 'unknown date')}, {between}) on {result.hardware}"
        )

    if result.status == OOM:
        if base_case is not None and base_rate is not None:
            msg = (
                f"{key}: out of memory at batch size {result.batch_size}, "
                f"the baseline measured {_fmt(base_rate)}; {base_where}"
            )
            return Verdict(
                REGRESSED,
                not policy.update,
                msg,
                baseline_images_per_sec=base_rate,
                baseline_commit=commit.get("sha"),
            )
        return Verdict(OOM, False, f"{key}: out of memory at batch size {result.batch_size}")
    assert rate is not None

    # The declared expectation is a floor, independent of any baseline.
    for exp in expectations:
        floor = exp.floor(policy.tolerance)
        if rate < floor:
            tol = policy.tolerance if exp.tolerance is None else exp.tolerance
            msg = (
                f"{key}: measured {_fmt(rate)} is below the expected {_fmt(exp.images_per_sec)} "
                f"(tolerance {tol:.0%}, floor {_fmt(floor)}) on hardware {result.hardware} "
                f"(marker hardware={exp.hardware!r})"
            )
            return Verdict(BELOW, True, msg, expected=exp.images_per_sec)
    expected = expectations[0].images_per_sec if expectations else None

    if base_case is None:
        msg = f"{key}: no baseline for hardware {result.hardware}"
        if elsewhere:
            msg += f" (stored for: {', '.join(sorted(elsewhere))}; see --mxperf-machine)"
        return Verdict(NEW, policy.strict and not policy.update, msg, expected=expected)
    if base_rate is None:
        msg = f"{key}: runs now ({_fmt(rate)}); the baseline ran out of memory; {base_where}"
        return Verdict(IMPROVED, False, msg, baseline_commit=commit.get("sha"), expected=expected)

    change = rate / float(base_rate) - 1
    noise = noise_of(result, base_case)
    threshold = max(policy.tolerance, NOISE_FACTOR * noise)
    common: dict[str, Any] = {
        "change": change,
        "threshold": threshold,
        "noise": noise,
        "baseline_images_per_sec": float(base_rate),
        "baseline_commit": commit.get("sha"),
        "expected": expected,
    }
    head = (
        f"{key}: {_fmt(rate)} vs baseline {_fmt(float(base_rate))} ({change:+.1%}), "
        f"tolerance {threshold:.1%} (noise {noise:.1%})"
    )
    if result.rel_iqr > MAX_REL_IQR or threshold > MAX_THRESHOLD:
        msg = f"{head}: too noisy to judge (block spread {result.rel_iqr:.1%}); {base_where}"
        return Verdict(UNSTABLE, policy.strict and not policy.update, msg, **common)
    if change < -threshold:
        lines = [f"{head}; {base_where}"]
        if len(result.attempts) > 1:
            tries = ", ".join(f"{a:.1f}" for a in result.attempts)
            lines.append(f"measured {len(result.attempts)} times (img/s: {tries}); judged the best")
        changed = diff_stack(base_case.get("software", {}), result.software) + diff_stack(
            base_case.get("environment", {}), result.environment
        )
        if base_case.get("threads") != result.threads:
            changed += diff_stack(base_case.get("threads", {}), result.threads)
        lines.append(
            "changed since the baseline: " + ("; ".join(changed) if changed else "nothing recorded")
        )
        return Verdict(REGRESSED, not policy.update, "\n".join(lines), **common)
    if change > threshold:
        msg = f"{head}: faster than the baseline; run with --mxperf-update to store it"
        return Verdict(IMPROVED, False, msg, **common)
    return Verdict(PASS, False, head, **common)
