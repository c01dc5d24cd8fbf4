"""Arbitration of a suspected stored-baseline regression by a paired run of the baseline commit:
the decision (`verdict.decide_arbitrated`) and its message (`explain.explain_arbitrated`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_mxperf.judging.decisions import (
    Policy,
    decide_arbitrated,
    decide_arbitration_pair,
    decide_paired,
)
from pytest_mxperf.judging.explain import explain_arbitrated, pair_summary
from pytest_mxperf.judging.pairstats import PairedRound, paired_estimate
from pytest_mxperf.measuring.records import Outcome, Verdict

STORED = Verdict(
    Outcome.REGRESSED, True, ("m: 70.9 img/s vs baseline 97.6 img/s (-27.4%)",), -0.274
)
PASSED = Verdict(Outcome.PASS, False, ("m: within the noise",), -0.07)


def _pair(*ratios: float) -> Verdict:
    est = paired_estimate([PairedRound(100.0, 100.0 * r) for r in ratios])
    return decide_paired(est, Policy())


SAME = _pair(1.0, 1.001, 0.999)
SLOWER = _pair(0.9, 0.9, 0.9)
NOISY = _pair(0.9, 1.1, 1.0)


def test_the_pairs_are_what_they_say() -> None:
    assert (SAME.outcome, SLOWER.outcome, NOISY.outcome) == (
        Outcome.PASS,
        Outcome.REGRESSED,
        Outcome.INCONCLUSIVE,
    )


@pytest.mark.parametrize(
    ("stored", "pair", "changed", "outcome", "failed"),
    [
        (STORED, SLOWER, False, Outcome.REGRESSED, True),  # confirmed
        (STORED, SLOWER, True, Outcome.REGRESSED, True),
        (PASSED, SLOWER, False, Outcome.REGRESSED, True),  # noise had hidden it
        (STORED, SAME, False, Outcome.MACHINE, False),  # the figure does not hold here
        (STORED, NOISY, False, Outcome.INCONCLUSIVE, False),  # not confirmed, not cleared
        (STORED, SAME, True, Outcome.REGRESSED, True),  # the change is the suspect
        # A pair without the baseline's software that cannot decide clears nothing either:
        # the upgrade may be the whole drop.
        (STORED, NOISY, True, Outcome.REGRESSED, True),
        (PASSED, SAME, False, Outcome.PASS, False),
        (PASSED, NOISY, True, Outcome.PASS, False),
        (STORED, None, False, Outcome.REGRESSED, True),  # no pair: the stored verdict
        (STORED, Verdict(Outcome.NEW, False), False, Outcome.REGRESSED, True),
    ],
)
def test_decide_arbitrated(
    stored: Verdict, pair: Verdict | None, changed: bool, outcome: Outcome, failed: bool
) -> None:
    verdict = decide_arbitrated(stored, pair, changed)
    assert (verdict.outcome, verdict.failed) == (outcome, failed)
    assert verdict.change == stored.change  # the stored evidence is kept
    if pair is not None and pair.interval is not None:
        assert verdict.interval == pair.interval and verdict.rounds == pair.rounds


def test_an_undecided_pair_fails_the_case_only_under_strict() -> None:
    est = paired_estimate([PairedRound(100.0, 100.0 * r) for r in (0.9, 1.1, 1.0)])
    strict = decide_paired(est, Policy(strict=True))
    assert strict.outcome is Outcome.INCONCLUSIVE and strict.failed
    verdict = decide_arbitrated(STORED, strict, False)
    assert verdict.outcome is Outcome.INCONCLUSIVE and verdict.failed
    assert not decide_arbitrated(STORED, NOISY, False).failed  # not strict: it passes
    assert not decide_arbitrated(STORED, strict, False, update=True).failed


def test_update_mode_never_fails_a_confirmed_loss() -> None:
    assert not decide_arbitrated(STORED, SLOWER, False, update=True).failed


def _message(pair: Verdict, changed: list[str], other: bool = False) -> str:
    ratios = {SAME: (1.0, 1.001, 0.999), SLOWER: (0.9, 0.9, 0.9), NOISY: (0.9, 1.1, 1.0)}[pair]
    est = paired_estimate([PairedRound(100.0, 100.0 * r) for r in ratios])
    verdict = decide_arbitrated(STORED, pair, bool(changed))
    return explain_arbitrated(STORED, verdict, est, "abc", "1/1", changed, other).message


def test_messages_give_the_stored_and_the_paired_evidence() -> None:
    confirmed = _message(SLOWER, [], other=True)
    assert confirmed.startswith(STORED.message)
    assert "confirmed by a paired run on this machine: HEAD vs baseline commit abc: -10.0%" in (
        confirmed
    )
    assert "the baseline was measured on another machine" in confirmed
    machine = _message(SAME, [])
    assert "the code is not slower; the stored figure does not hold here" in machine
    assert "--mxperf-update" in machine


def test_messages_name_the_software_change() -> None:
    change = ["mxnet: 1.8.0 -> 1.9.1"]
    cleared = _message(SAME, change)
    assert "cleared the code" in cleared and "mxnet: 1.8.0 -> 1.9.1" in cleared
    undecided = _message(NOISY, change)
    assert "could not decide" in undecided and "mxnet: 1.8.0 -> 1.9.1" in undecided
    assert "cleared" not in undecided


def test_an_inconclusive_pair_says_it_is_no_slower_on_average_and_the_rounds_it_needs() -> None:
    # As in --mxperf-ab mode: "inconclusive" names what the pair lacks, not only its interval.
    est = paired_estimate([PairedRound(100.0, 100.0 * r) for r in (0.9, 1.1, 1.02)])
    assert est.suggested_rounds is not None and est.ratio >= 1.0
    verdict = decide_arbitrated(STORED, decide_paired(est, Policy()), False)
    assert verdict.outcome is Outcome.INCONCLUSIVE
    text = explain_arbitrated(STORED, verdict, est, "abc", "1/1", [], False).message
    n = est.suggested_rounds
    assert "a paired run could not confirm it: HEAD vs baseline commit abc" in text
    assert f": inconclusive, no slower on average; about {n} rounds would decide" in text
    assert "--mxperf-pair-budget" not in text
    spent = explain_arbitrated(STORED, verdict, est, "abc", "1/1", [], False, budget_spent=True)
    assert "the run's --mxperf-pair-budget was spent before its rounds" in spent.message


def test_an_unstable_case_the_pair_cannot_decide_says_so_without_blaming_changes() -> None:
    unstable = Verdict(Outcome.UNSTABLE, False, ("m: 674.4 img/s vs baseline 1002.4: too noisy",))
    est = paired_estimate([PairedRound(100.0, 100.0 * r) for r in (0.85, 0.93, 1.14)])
    verdict = decide_arbitrated(unstable, decide_paired(est, Policy()), False, False)
    text = explain_arbitrated(unstable, verdict, est, "abc", "1/1", [], False).message
    assert "a paired run could not decide either: HEAD vs baseline commit abc" in text
    assert "without the baseline's software" not in text
    assert "what changed since the baseline" not in text


def test_an_unstable_case_the_pair_clears_passes() -> None:
    # Beside a noisy neighbour a case's own blocks spread 54% (unstable); its pair's rounds
    # ruled out a loss. Seen on an emulated new host: it stayed "unstable" and its message said
    # the drop came from "what changed since the baseline:" with nothing named.
    unstable = Verdict(Outcome.UNSTABLE, False, ("m: 201.6 img/s vs baseline 290.4: too noisy",))
    est = paired_estimate([PairedRound(100.0, 100.0 * r) for r in (1.0, 1.01, 0.995, 1.005)])
    verdict = decide_arbitrated(unstable, decide_paired(est, Policy()), False)
    assert verdict.outcome is Outcome.PASS and not verdict.failed
    text = explain_arbitrated(unstable, verdict, est, "abc", "1/1", [], False).message
    assert "a paired run on this machine found no loss: HEAD vs baseline commit abc" in text
    assert "what changed since the baseline" not in text
    # With the software changed, today's pair judged the code only: the case stays unstable,
    # and the message names the change.
    changed = decide_arbitrated(unstable, decide_paired(est, Policy()), True)
    assert changed.outcome is Outcome.UNSTABLE
    why = explain_arbitrated(unstable, changed, est, "abc", "1/1", ["mxnet: 1.8 -> 1.9"], False)
    assert "so the drop comes from what changed since the baseline: mxnet: 1.8 -> 1.9" in (
        why.message
    )


def test_a_pass_carries_the_interval_that_decided_it() -> None:
    # Two rounds that agree: the 90% equivalence interval decides (and the table shows it);
    # the 99% interval of a t with one degree of freedom is many times wider.
    est = paired_estimate([PairedRound(100.0, 100.2), PairedRound(100.0, 99.9)])
    verdict = decide_paired(est, Policy())
    assert verdict.outcome is Outcome.PASS
    assert est is not None and verdict.interval == (est.same_low, est.same_high)
    assert (est.high - est.low) > 3 * (est.same_high - est.same_low)
    assert SLOWER.interval is not None and SLOWER.interval[1] < 1.0  # a failure: the 99% one
    est_slow = paired_estimate([PairedRound(100.0, 90.0)] * 3)
    assert SLOWER.interval == (est_slow.low, est_slow.high)


def test_an_undecided_pair_names_its_equivalence_interval_too() -> None:
    est = paired_estimate([PairedRound(100.0, 108.0), PairedRound(100.0, 98.0)])
    assert est.decision.value == "unknown"
    text = pair_summary(est, "REV", est.confidence)
    assert (
        f"99% interval {est.low - 1:+.1%} .. {est.high - 1:+.1%}, 2 round(s); 90% interval" in text
    )
    assert f"90% interval {est.same_low - 1:+.1%} .. {est.same_high - 1:+.1%})" in text


def test_an_undecided_pair_clears_a_stored_loss_at_the_cases_own_threshold() -> None:
    # A case with noisy blocks fails beyond 17.5% (its stored threshold). Rounds of -9% ..
    # +11% rule out a 17.5% loss, not a 5% one: "machine", where at the minimum effect alone
    # the pair was inconclusive.
    est = paired_estimate([PairedRound(100.0, 100.0 * r) for r in (0.91, 1.11, 1.02, 0.98)])
    assert decide_paired(est, Policy()).outcome is Outcome.INCONCLUSIVE
    noisy = replace(STORED, threshold=0.175)
    pair = decide_arbitration_pair(est, noisy, Policy())
    assert pair.outcome is Outcome.PASS and pair.interval == (est.same_low, est.same_high)
    verdict = decide_arbitrated(noisy, pair, False)
    assert verdict.outcome is Outcome.MACHINE and not verdict.failed
    text = explain_arbitrated(noisy, verdict, est, "abc", "1/1", [], False).message
    assert "the code is not slower by 17.5% or more, the case's own threshold" in text
    # No wider threshold, or a scaling efficiency's: undecided as before.
    for stored in (STORED, replace(STORED, threshold=0.05), replace(noisy, scaling=True)):
        assert decide_arbitration_pair(est, stored, Policy()).outcome is Outcome.INCONCLUSIVE
    # A loss the pair is sure of still fails at the minimum effect, whatever the threshold.
    sure = paired_estimate([PairedRound(100.0, 100.0 * r) for r in (0.92, 0.925, 0.93)])
    assert decide_arbitration_pair(sure, noisy, Policy()).outcome is Outcome.REGRESSED
