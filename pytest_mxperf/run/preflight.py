"""What a run learns of its stored baselines before its first case: whether the machine that
stored them ran the calibration probe as fast as this one, and, where it did not, the one
paired run that judges every case instead (`pytest_mxperf.case.jointpair` decides and runs it)."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.measuring.verdicts import Finding
from pytest_mxperf.paired.pairdata import HEAD, PairedData

#: Beyond this factor either way the stored figures are taken not to hold on this machine.
#: One process's figure moves that much between runs on a shared VM (docs/measurements.md,
#: "Hosts and noise"): a smaller factor would pair runs of machines that do match (costly).
THRESHOLD = 1.25
#: Cases judged against one commit's stored figures before their median change is taken as
#: the hour's (`Preflight.hour`): one case could be one the machine treats differently. As
#: many cases cleared by their own pairs confirm the hour's size (`Preflight.explained`).
HOUR_CASES = 2


@dataclass
class Undecided:
    """A case its own pair (with commit ``sha``) left inconclusive before the run's joint pair
    started: the joint pair measures it again, counting ``rounds`` (its own pair's, ``(REV,
    HEAD)``) as its first, and ``again`` then judges it once more from them all (the result as
    the test would have kept it, with the note it is given last in its verdict)."""

    sha: str
    nodeid: str
    key: CaseKey
    rounds: list[tuple[CaseResult, CaseResult]]
    again: Callable[[Finding], CaseResult]


@dataclass
class Preflight:
    """The calibration of this run against the stored file, and the joint pair if any."""

    #: The decision is taken (at the first case with a stored baseline).
    decided: bool = False
    #: The probe's images/sec stored with the file, and measured here (None: unknown).
    stored: float | None = None
    now: float | None = None
    #: The stored file's commit, and the pair of it with HEAD over the run's cases.
    sha: str | None = None
    data: PairedData | None = None
    nodeids: tuple[str, ...] = ()
    #: Why no joint pair was run although the figures do not hold here.
    why_not: str | None = None
    #: Per baseline commit, the stored-figure changes of the cases whose own pairs found the
    #: code no slower (`pytest_mxperf.case.jointpair.note_arbitrated`); the commit whose
    #: count reached the evidence, until the next case starts the joint pair; and whether the
    #: evidence was used (a run starts at most one joint pair that way).
    off: dict[str, list[float]] = field(default_factory=dict)
    #: Per baseline commit, the cases judged against its stored figures before any joint pair.
    judged: Counter[str] = field(default_factory=Counter)
    evidence_sha: str | None = None
    evidence_used: bool = False
    #: Cases their own pairs left inconclusive before the joint pair started (`Undecided`),
    #: and the outcome of each the joint pair judged again, by case key.
    undecided: list[Undecided] = field(default_factory=list)
    judged_again: dict[CaseKey, str] = field(default_factory=dict)
    #: Per baseline commit, the changes against their stored figures of the cases judged so
    #: far, in order (`hour`).
    changes: dict[str, list[float]] = field(default_factory=dict)
    #: Per baseline commit, the changes of the cases below its figures whose own pairs found
    #: the code no slower (passes confirmed and ``machine`` alike: `explained`).
    cleared: dict[str, list[float]] = field(default_factory=dict)
    #: Per baseline commit whose hour explained more than half the floor: the floor's
    #: tolerance (`explained`, for the summary's line: `describe_hour`).
    explained_at: dict[str, float] = field(default_factory=dict)
    #: Hardware keys whose probe this process measured for ``--mxperf-update``.
    calibrated: set[str] = field(default_factory=set)

    @property
    def factor(self) -> float | None:
        """This machine's probe figure over the stored one (0.67: a third slower here)."""
        if self.stored is None or self.now is None:
            return None
        return self.now / self.stored

    def hour(self, sha: str, change: float | None) -> float | None:
        """How much slower this machine runs now than when ``sha``'s figures were stored, for
        a case judged against them that measured ``change``: the slower of the probe's factor
        and the run's own cases' (1 + the median change of the cases judged against ``sha``
        before this one, from `HOUR_CASES` of them; None: neither known). Notes ``change`` for
        the cases after it. On a slower hour the probe, a small network, may run as fast while
        the models run a few percent slower (docs/measurements.md): the cases say so."""
        earlier = self.changes.setdefault(sha, [])
        factors = [] if self.factor is None else [self.factor]
        if len(earlier) >= HOUR_CASES:
            factors.append(1.0 + statistics.median(earlier))
        if change is not None:
            earlier.append(change)
        return min(factors, default=None)

    def explained(self, sha: str, tolerance: float) -> float:
        """The largest drop below ``sha``'s stored figures the hour may explain without a pair
        (`judging.decisions.suspected`): half the floor ``tolerance``, until `HOUR_CASES` cases
        of that commit were paired and found no slower (the drop is the machine's, their pairs
        say); then the median of their drops, where that is more (up to what the probe's
        `THRESHOLD` allows before the figures are taken not to hold at all). Why: on a slower
        hour of a noisy VM every case runs 5-20% below figures stored at another hour; capped
        at half the floor, each such case is paired, although the first pairs already showed
        the hour, not the code, is slower. A uniform real loss clears no pair, so it keeps the
        cap."""
        floor = tolerance / 2
        cleared = self.cleared.get(sha, [])
        if len(cleared) < HOUR_CASES:
            return floor
        explained = min(-statistics.median(cleared), 1 - 1 / THRESHOLD)
        if explained <= floor:
            return floor
        self.explained_at[sha] = tolerance
        return explained

    def describe_hour(self) -> list[str]:
        """The summary's lines on the hours that explained more than half the floor: how far
        below its figures the run measured, which pairs said so, where pairing started (none
        once a joint pair judged the run: its own line says why)."""
        if self.data is not None:
            return []
        lines = []
        for sha, tolerance in self.explained_at.items():
            median = statistics.median(self.changes[sha])
            cleared = ", ".join(f"{c:+.1%}" for c in self.cleared[sha])
            lines.append(
                f"mxperf: a slower hour: the cases compared with the figures of {sha[:10]} "
                f"measured a median {median:+.1%} against them, and {len(self.cleared[sha])} "
                f"cases' own pairs found the code no slower ({cleared}): a passing case was "
                f"paired only {tolerance / 2:.1%} or more below the hour"
            )
        return lines

    def note_cleared(self, sha: str, change: float) -> None:
        """A case ``change`` below ``sha``'s figures that its own pair found no slower."""
        self.cleared.setdefault(sha, []).append(change)

    @property
    def holds(self) -> bool:
        """The stored figures describe this machine, as far as the probe can tell."""
        f = self.factor
        return f is None or 1 / THRESHOLD <= f <= THRESHOLD

    def covers(self, key: CaseKey) -> PairedData | None:
        """The joint pair when it measured ``key`` on HEAD's side (None: it did not)."""
        data = self.data
        if data is None or not data.measured(HEAD, key):
            return None
        return data

    @property
    def on_evidence(self) -> bool:
        """The joint pair was started by the run's own cases, not by the probe."""
        return self.data is not None and self.evidence_used

    def describe(self) -> str | None:
        """The summary's line on the calibration and the joint pair (None: nothing to say: no
        calibration stored, or the figures hold here, and no joint pair)."""
        f = self.factor
        if self.on_evidence and self.sha:
            found = len(self.off.get(self.sha, ()))
            return (
                f"mxperf: {len(self.nodeids)} benchmark(s) were measured in one paired run of "
                f"the baseline commit {self.sha[:10]} and HEAD on this machine and judged by "
                f"it, after {found} cases below their stored figures were found no slower by "
                f"their own pairs{self._again_text()}"
            )
        if f is None or self.holds:
            return None
        line = (
            f"mxperf: calibration: this machine runs the calibration probe at {f:.2f}x the "
            "speed it ran when the baselines were stored"
        )
        if self.data is not None and self.sha:
            return (
                f"{line}; {len(self.nodeids)} benchmark(s) were measured in one paired run of "
                f"the baseline commit {self.sha[:10]} and HEAD on this machine and judged by it"
            )
        return f"{line}; no joint paired run ({self.why_not}): each case was judged alone"

    def _again_text(self) -> str:
        """``; N of them ... judged again (outcomes)`` when the joint pair judged cases again."""
        if not self.judged_again:
            return ""
        counts = Counter(self.judged_again.values())
        said = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
        return (
            f"; {len(self.judged_again)} case(s) their own pairs had left inconclusive were "
            f"measured in it too and judged again ({said})"
        )

    def as_dict(self) -> dict[str, Any] | None:
        if not self.decided or (self.stored is None and not self.on_evidence):
            return None
        return {
            "stored_images_per_sec": self.stored,
            "images_per_sec": self.now,
            "factor": self.factor,
            "threshold": THRESHOLD,
            "holds": self.holds,
            "paired_with": self.sha if self.data is not None else None,
            "cases_paired": len(self.nodeids) if self.data is not None else 0,
            "why_not_paired": self.why_not,
            "paired_on_evidence": [
                {"commit": sha, "changes": changes} for sha, changes in self.off.items()
            ]
            if self.on_evidence
            else None,
            "judged_again": {str(k): v for k, v in self.judged_again.items()},
        }
