"""The verdict and message of a suspected case whose code is the baseline commit's."""

from __future__ import annotations

import pytest

from pytest_mxperf.judging.decisions import decide_same_code
from pytest_mxperf.judging.explain import explain_same_code
from pytest_mxperf.measuring.records import Outcome, Verdict

STORED = Verdict(
    Outcome.REGRESSED,
    True,
    ("m: 70.9 img/s vs baseline 97.6 img/s (-27.4%)", "measured 3 times"),
    -0.274,
)
PASSED = Verdict(Outcome.PASS, False, ("m: within the noise",), -0.07)


@pytest.mark.parametrize(
    ("stored", "changed", "outcome", "failed"),
    [
        (STORED, False, Outcome.MACHINE, False),  # nothing differs: the machine's
        (STORED, True, Outcome.REGRESSED, True),  # the software changed: it stands
        (PASSED, False, Outcome.PASS, False),
    ],
)
def test_decide_same_code(stored: Verdict, changed: bool, outcome: Outcome, failed: bool) -> None:
    verdict = decide_same_code(stored, changed)
    assert (verdict.outcome, verdict.failed) == (outcome, failed)
    assert verdict.change == stored.change


def test_messages() -> None:
    machine = explain_same_code(STORED, decide_same_code(STORED, False), "abc1234567", [], True)
    assert machine.outcome == Outcome.MACHINE
    assert machine.message.splitlines() == [
        STORED.lines[0],  # the lead only: the rest judged a loss that is the machine's
        "but the code is the baseline commit abc1234567's (only baseline files differ): the "
        "stored figure does not hold on this machine (the baseline was measured on another "
        "machine). Store a baseline for this machine with --mxperf-update (or name it with "
        "--mxperf-machine)",
    ]
    changed = ["mxnet: 1.8.0 -> 1.9.1"]
    stands = explain_same_code(STORED, STORED, "abc1234567", changed, False)
    assert stands.message == (
        f"{STORED.message}\nthe code is the baseline commit abc1234567's (only baseline files "
        "differ), so the drop comes from what changed since the baseline: mxnet: 1.8.0 -> 1.9.1"
    )
    passed = explain_same_code(PASSED, PASSED, "abc1234567", [], False)
    assert passed.message == (
        "m: within the noise\nthe code is the baseline commit abc1234567's (only baseline files "
        "differ): no paired run needed"
    )
