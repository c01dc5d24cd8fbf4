"""The rounds of a paired run (REV's and HEAD's results in each) and what is read from them:
pairs, paired estimates, cases still undecided (their JSON record: `pairjson`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging import pairstats
from pytest_mxperf.judging.roundeffect import RoundNoise, round_noise
from pytest_mxperf.measuring.records import CaseResult, Status

REV, HEAD = "rev", "head"


@dataclass
class SideResult:
    """What one side measured in one round, or why it failed."""

    cases: dict[CaseKey, CaseResult] = field(default_factory=dict)
    collect_errors: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None
    #: Node id -> why that test failed at this side (setup or call), as ``ExceptionType:
    #: message``: a test that raised before measuring a case leaves no case, only this.
    test_errors: dict[str, str] = field(default_factory=dict)


@dataclass
class PairedData:
    """Every round of a paired run: per round, REV's and HEAD's results."""

    rev_label: str
    rev_sha: str
    #: The CPUs both sides ran pinned to (`pytest_mxperf.system.cpus.describe`; "": not pinned).
    cpus: str = ""
    #: What HEAD's side measured, in messages: "HEAD", or "the working tree" when it has
    #: uncommitted changes (the side measures the files as they are, not the commit).
    head_name: str = "HEAD"
    rounds: list[dict[str, SideResult]] = field(default_factory=list)
    #: Rounds run only to profile the cases found regressed (their figures are no evidence:
    #: adding them would move a decision already taken); see `pairing.Pairer.run`.
    profile_rounds: list[dict[str, SideResult]] = field(default_factory=list)
    #: Undecided cases were left without the rounds that could decide them: the session's
    #: ``--mxperf-pair-budget`` was spent.
    budget_spent: bool = False
    #: The second paired run of the cases this one found regressed, on fresh processes (new
    #: fork servers for both sides: ``--mxperf-pair-confirm``); its estimate decides them.
    confirmation: PairedData | None = None
    #: Rounds of a case measured earlier in the run by a pair of its own with the same commit
    #: (`pytest_mxperf.case.jointpair`: a case that pair left inconclusive, measured again by
    #: the run's joint pair), ``(REV, HEAD)`` per round: counted as rounds of this pair for that
    #: case, before its own (the same comparison of the same code in this session), also
    #: against ``--mxperf-max-rounds``; not in the run's round effect (`round_noise`), which
    #: they were picked for disagreeing.
    earlier: dict[CaseKey, list[tuple[CaseResult, CaseResult]]] = field(default_factory=dict)
    #: Wall seconds of each of `rounds` (both sides, start-up included), for where a paired
    #: run's time went (the JSON report's record of it).
    round_seconds: list[float] = field(default_factory=list)
    #: The cases given the rounds beyond the first, a second run and a profile so far (None:
    #: every case; `pairing.Pairer.run`'s ``focus``).
    focused: set[CaseKey] | None = None

    def pairs(self, key: CaseKey) -> list[tuple[CaseResult, CaseResult]]:
        """``(REV, HEAD)`` results of ``key`` in the rounds where both sides measured it (its
        `earlier` rounds first)."""
        return [*self.earlier.get(key, ()), *self._own_pairs(key)]

    def _own_pairs(self, key: CaseKey) -> list[tuple[CaseResult, CaseResult]]:
        out = []
        for r in self.rounds:
            a, b = r[REV].cases.get(key), r[HEAD].cases.get(key)
            if a is not None and b is not None and a.images_per_sec and b.images_per_sec:
                out.append((a, b))
        return out

    def side_failures(self, side: str, nodeid: str | None = None) -> list[str]:
        """Why a side measured nothing: whole-process failures, and collection errors (of the
        file of ``nodeid`` when given)."""
        failures = sorted({e for r in self.rounds if (e := r[side].error)})
        path = None if nodeid is None else nodeid.split("::")[0]
        errors = {
            f"{n}: {t}"
            for r in self.rounds
            for n, t in r[side].collect_errors
            if path is None or n.split("::")[0] == path
        }
        return failures + sorted(errors)

    def broken(self, side: str, key: CaseKey) -> list[tuple[int, Status, str]]:
        """Why ``side`` measured no figure for ``key`` in rounds that should have one: the case
        errored or gave NaN there, or it measured no img/s, or (a whole process failing, a
        data-parallel case whose ranks measured nothing) it is missing in a round where the
        other side measured it. Each as ``(round number, status, why)``; [] when every round of
        this side that ran the case measured it. A case missing from every round of a side is
        not broken (it does not exist there: `side_failures` says why), unless its test failed
        there (it raised before measuring the case: that side's error, said with its
        exception)."""
        other = HEAD if side == REV else REV
        ever = any(key in r[side].cases for r in self.rounds)
        out: list[tuple[int, Status, str]] = []
        for index, r in enumerate(self.rounds, 1):
            mine, theirs = r[side].cases.get(key), r[other].cases.get(key)
            if mine is None:
                raised = None if theirs is None else r[side].test_errors.get(theirs.nodeid)
                if theirs is not None and (ever or r[side].error or raised):
                    why = r[side].error or "the side process did not report the case"
                    if raised:
                        why = f"the test {theirs.nodeid} failed before measuring it: {raised}"
                    out.append((index, Status.ERROR, why))
            elif mine.status in (Status.ERROR, Status.NAN):
                why = mine.error or ("NaN output" if mine.status == Status.NAN else "error")
                out.append((index, mine.status, why))
            elif mine.status == Status.OK and not mine.images_per_sec:
                why = mine.error or "no img/s measured"
                out.append((index, Status.ERROR, why))
        return out

    def collect_problems(self, side: str) -> list[tuple[str, str]]:
        """``(node id, error)`` of what ``side`` could not collect, once each, in the order
        first seen (the same file fails the same way every round)."""
        seen: dict[str, str] = {}
        for r in self.rounds:
            for nodeid, text in r[side].collect_errors:
                seen.setdefault(nodeid, text)
        return list(seen.items())

    def side_label(self, side: str) -> str:
        """``rev (HEAD~1)`` or ``head (HEAD)``, for progress lines."""
        return f"{side} ({self.rev_label if side == REV else self.head_name})"

    def broken_message(self, key: CaseKey) -> tuple[Status, str] | None:
        """The status and message of a case `broken` on either side (None: neither): NaN when
        a side gave NaN, else an error; each side's reasons grouped by rounds."""
        parts, statuses = [], set()
        for side, name in ((HEAD, self.head_name), (REV, self.rev_label)):
            found = self.broken(side, key)
            by_why: dict[str, list[int]] = {}
            for index, status, why in found:
                statuses.add(status)
                by_why.setdefault(why.strip(), []).append(index)
            for why, rounds in by_why.items():
                which = "round" if len(rounds) == 1 else "rounds"
                listed = ", ".join(map(str, rounds))
                parts.append(f"{name}'s side measured nothing in {which} {listed}: {why}")
        if not parts:
            return None
        return (Status.NAN if Status.NAN in statuses else Status.ERROR), "\n".join(parts)

    def measured(self, side: str, key: CaseKey) -> bool:
        return any(key in r[side].cases for r in self.rounds)

    def estimate(self, key: CaseKey, min_effect: float) -> pairstats.PairedEstimate | None:
        """The paired estimate of ``key``; None with fewer than two rounds measuring both. Its
        equivalence interval may take the round effect of all the run's cases
        (`roundeffect.round_noise`)."""
        return self.estimates([key], min_effect)[key]

    def estimates(
        self, keys: Sequence[CaseKey], min_effect: float
    ) -> dict[CaseKey, pairstats.PairedEstimate | None]:
        """`estimate` of each of ``keys``, the run's round effect worked out once for all."""
        pooled = self.round_noise()
        out: dict[CaseKey, pairstats.PairedEstimate | None] = {}
        for key in keys:
            rounds = self.paired_rounds(key)
            out[key] = (
                pairstats.paired_estimate(rounds, min_effect=min_effect, pooled=pooled)
                if len(rounds) >= 2
                else None
            )
        return self._confirmed(out, min_effect)

    def _confirmed(
        self, first: dict[CaseKey, pairstats.PairedEstimate | None], min_effect: float
    ) -> dict[CaseKey, pairstats.PairedEstimate | None]:
        """``first`` with each regression the `confirmation` measured replaced by its estimate
        there (carrying the first as ``first``): a regression stands only if a second run, on
        fresh processes, finds it too. A case the second run could not pair keeps the first."""
        again = self.confirmation
        if again is None:
            return first
        keys = [
            k for k, est in first.items() if est and est.decision == pairstats.Decision.REGRESSED
        ]
        out = dict(first)
        for key, est in again.estimates(keys, min_effect).items():
            if est is not None:
                out[key] = replace(est, first=first[key])
        return out

    def paired_rounds(self, key: CaseKey, earlier: bool = True) -> list[pairstats.PairedRound]:
        """The rounds where both sides measured ``key``, as the statistics take them (without
        its `earlier` rounds when ``earlier`` is false)."""
        return [
            pairstats.PairedRound(
                rev=a.images_per_sec or 0.0,
                head=b.images_per_sec or 0.0,
                rev_blocks=tuple(a.measurement.block_rates) if a.measurement else (),
                head_blocks=tuple(b.measurement.block_rates) if b.measurement else (),
                pairs=block_pairs(a, b),
                pooled=b.key.mode != "pipeline",  # an input pipeline's rounds: its own spread
            )
            for a, b in (self.pairs(key) if earlier else self._own_pairs(key))
        ]

    def round_noise(self) -> RoundNoise | None:
        """The run's round effect, from every case its rounds timed in turns (its own rounds)."""
        return round_noise(self.paired_rounds(key, earlier=False) for key in case_keys(self))

    def scaling_pairs(self, key: CaseKey) -> list[tuple[CaseResult, CaseResult]]:
        """The rounds of a data-parallel ``key`` where both sides measured an efficiency."""
        return [
            (a, b)
            for a, b in self.pairs(key)
            if a.scaling is not None
            and b.scaling is not None
            and a.scaling.efficiency > 0
            and b.scaling.efficiency > 0
        ]

    def efficiency_estimate(
        self, key: CaseKey, min_effect: float
    ) -> pairstats.PairedEstimate | None:
        """The paired estimate of a data-parallel case's scaling efficiency (HEAD/REV), as
        `estimate` does for img/s; the within-round noise is the aggregate's block spread."""
        pairs = self.scaling_pairs(key)
        if len(pairs) < 2:
            return None
        rounds = []
        for a, b in pairs:
            assert a.scaling is not None and b.scaling is not None
            rounds.append(
                pairstats.PairedRound(
                    rev=a.scaling.efficiency,
                    head=b.scaling.efficiency,
                    rev_blocks=tuple(a.measurement.block_rates) if a.measurement else (),
                    head_blocks=tuple(b.measurement.block_rates) if b.measurement else (),
                )
            )
        return pairstats.paired_estimate(rounds, min_effect=min_effect)


def block_pairs(rev: CaseResult, head: CaseResult) -> tuple[tuple[float, float], ...]:
    """``(rev_i, head_i)`` images/sec of the blocks both sides timed in turns (lock-step); ()
    when either measured alone."""
    a, b = rev.measurement, head.measurement
    if a is None or b is None or not (a.extra.get("interleaved") and b.extra.get("interleaved")):
        return ()
    ra, rb = a.block_rates, b.block_rates
    if len(ra) != len(rb) or len(ra) < 2:
        return ()
    return tuple(zip(ra, rb))


def undecided(data: PairedData, keys: Sequence[CaseKey], min_effect: float) -> list[CaseKey]:
    """Keys whose paired estimate cannot decide yet (more rounds may settle them)."""
    return _decided_as(data, keys, min_effect, pairstats.Decision.UNKNOWN)


def regressed(data: PairedData, keys: Sequence[CaseKey], min_effect: float) -> list[CaseKey]:
    """Keys whose paired estimate says HEAD is slower (worth an operator profile)."""
    return _decided_as(data, keys, min_effect, pairstats.Decision.REGRESSED)


def _decided_as(
    data: PairedData, keys: Sequence[CaseKey], min_effect: float, decision: pairstats.Decision
) -> list[CaseKey]:
    estimates = data.estimates(keys, min_effect)
    return [key for key, est in estimates.items() if est is not None and est.decision == decision]


def block_plan(data: PairedData) -> dict[CaseKey, int]:
    """Steps per timed block for the later rounds of every case both sides have measured: the
    larger of the two sides' in the first round that measured both. Both sides then time the
    same work per block, and neither sizes its blocks again (`measure.MeasureConfig`)."""
    plan: dict[CaseKey, int] = {}
    for key in case_keys(data):
        for a, b in data.pairs(key):
            if a.measurement is not None and b.measurement is not None:
                plan[key] = max(a.measurement.steps_per_block, b.measurement.steps_per_block)
                break
    return plan


def case_keys(data: PairedData) -> list[CaseKey]:
    """Every case a side measured in a round, in the order of their text (``bs16`` before
    ``bs4``), as when the text was the key."""
    return sorted({k for r in data.rounds for side in r.values() for k in side.cases}, key=str)


def nodeids_of(data: PairedData, keys: Sequence[CaseKey]) -> list[str]:
    wanted = set(keys)
    return sorted(
        {
            c.nodeid
            for r in data.rounds
            for side in r.values()
            for k, c in side.cases.items()
            if k in wanted
        }
    )


def rounds_text(data: PairedData, key: CaseKey) -> str:
    """``key``'s img/s per round (`describe_round`), then its second run's when there is one
    (``...; second run: ...``)."""
    text = ", ".join(describe_round(p) for p in data.pairs(key))
    again = data.confirmation.pairs(key) if data.confirmation is not None else []
    if again:
        text += "; second run: " + ", ".join(describe_round(p) for p in again)
    return text


def describe_round(pair: tuple[CaseResult, CaseResult]) -> str:
    a, b = pair
    return f"{a.images_per_sec or 0:.1f}/{b.images_per_sec or 0:.1f}"


def describe_efficiency_round(pair: tuple[CaseResult, CaseResult]) -> str:
    a, b = pair
    assert a.scaling is not None and b.scaling is not None
    return f"{a.scaling.efficiency:.1%}/{b.scaling.efficiency:.1%}"
