"""Issue 49 item 2 (paired runs): a test that raises at REV before measuring its case is REV's
error, said with its exception and the test; it is not a case that is "new" there."""

from __future__ import annotations

from typing import Callable

import pytest

from pytest_mxperf.testing.repos import cases_by_key, read_report

# REV's body raises before it reaches the fixture's call: REV's side measures no case.
RAISES_FIRST = """
from pytest_mxperf.testing import FakeModel

def test_model(mxperf):
    raise KeyError("weights_v2 missing at this revision")
    mxperf.inference(FakeModel(400.0), batch_size=8, model="model")
"""

FIXED = """
from pytest_mxperf.testing import FakeModel

def test_model(mxperf):
    mxperf.inference(FakeModel(400.0), batch_size=8, model="model")
"""

# REV's fixture fails in its set-up: the same, said as a set-up error.
SETUP_FAILS = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.fixture
def weights():
    raise OSError("weights.params: no such file at this revision")

def test_model(mxperf, weights):
    mxperf.inference(FakeModel(400.0), batch_size=8, model="model")
"""

FIXED_SETUP = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.fixture
def weights():
    return None

def test_model(mxperf, weights):
    mxperf.inference(FakeModel(400.0), batch_size=8, model="model")
"""

KEY = "model/inference/float32/bs8/cpu"


@pytest.mark.parametrize(
    ("rev_suite", "fixed", "said"),
    [
        (RAISES_FIRST, FIXED, "KeyError: 'weights_v2 missing at this revision'"),
        (
            SETUP_FAILS,
            FIXED_SETUP,
            "OSError: weights.params: no such file at this revision (in its set-up)",
        ),
    ],
)
def test_a_test_that_raises_at_rev_is_revs_error_not_new(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    rev_suite: str,
    fixed: str,
    said: str,
) -> None:
    fake_pytester.makepyfile(test_suite=rev_suite)
    commit("a benchmark that raises before measuring")
    fake_pytester.makepyfile(test_suite=fixed)  # fixed in the working tree, uncommitted
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD", "--mxperf-json", "report.json"
    )
    # As a raising working tree already is: an error of the pair, which fails the test.
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "does not exist there" not in out
    why = "HEAD's side measured nothing in round* 1*: the test test_suite.py::test_model failed "
    result.stdout.fnmatch_lines([f"mxperf: {KEY}: {why}before measuring it: {said}"])
    case = cases_by_key(fake_pytester.path)[KEY]
    assert case["status"] == "error"
    assert case["verdict"]["status"] == "error"
    assert said in case["verdict"]["message"]
    assert "does not exist there" not in case["verdict"]["message"]
    rev_round = read_report(fake_pytester.path)["paired"]["rounds"][0]["rev"]
    assert said in rev_round["test_errors"]["test_suite.py::test_model"]
