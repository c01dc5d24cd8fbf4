"""A regression found by a paired run is paired again on fresh processes (``--mxperf-pair-
confirm``, on by default) and fails only if that second run finds it too: a bias that one
run's processes carry (here, by construction, HEAD is slower only in sides forked from the
first fork server its side had) is cleared; a real loss (test_paired_mode) is failed by both."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from pytest_mxperf.testing.repos import read_report, worktrees

#: The baseline commit's code: 100 img/s everywhere.
PLAIN = """
from pytest_mxperf.testing import FakeModel

def test_fast(mxperf):
    mxperf.inference(FakeModel(100.0), batch_size=8, model="fast")
"""

#: HEAD's code: identical, except that a side forked from the first server any HEAD side ran
#: from measures 80 img/s (the bias of one run's processes), and so does the controller's own
#: run of the body with ``CONTROLLER`` set (a figure below the stored one, for arbitration).
#: Every side appends its server's pid (its parent) to ``PARENTS``.
BIASED = """
import json
import os
from pathlib import Path
from pytest_mxperf.testing import FakeModel

PARENTS = Path(os.environ["MXPERF_TEST_PARENTS"])


def speed(request):
    if request.config.getoption("--mxperf-side-out") is None:
        return float(os.environ.get("MXPERF_TEST_CONTROLLER", "100"))
    with PARENTS.open("a") as log:
        log.write(f"{os.getppid()}\\n")
    first = PARENTS.read_text().split()[0]
    return 80.0 if first == str(os.getppid()) else 100.0


def test_fast(mxperf, request):
    mxperf.inference(FakeModel(speed(request)), batch_size=8, model="fast")
"""

KEY = "fast/inference/float32/bs8/cpu"


@pytest.fixture
def biased(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """PLAIN committed, then BIASED committed on top; returns the parents' log."""
    fake_pytester.makepyfile(test_suite=PLAIN)
    commit("plain")
    fake_pytester.makepyfile(test_suite=BIASED)
    commit("biased sides")
    parents = tmp_path_factory.mktemp("sides") / "parents.txt"
    monkeypatch.setenv("MXPERF_TEST_PARENTS", str(parents))
    return parents


def _parents(log: Path) -> list[str]:
    return log.read_text().split()


def test_a_slowdown_only_one_runs_processes_show_is_cleared_by_the_second_run(
    fake_pytester: pytest.Pytester, biased: Path
) -> None:
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*paired run vs HEAD~1: second run, round 1, *"])
    report = read_report(fake_pytester.path)
    (case,) = report["cases"]
    assert case["verdict"]["status"] == "pass" and not case["verdict"]["failed"]
    message = case["verdict"]["message"]
    assert (
        f"{KEY}: HEAD vs HEAD~1: +0.0% (99% interval " in message
        and "measured again on fresh processes after a first paired run found -20.0% (99% interval "
        in message
    ), message
    assert (
        "img/s per round (HEAD~1/HEAD): 100.0/80.0, 100.0/80.0, 100.0/80.0; second run: "
        "100.0/100.0, 100.0/100.0" in message
    ), message
    # The figures shown are the second run's, which decided.
    assert case["measurement"]["images_per_sec"] == pytest.approx(100.0)
    paired = report["paired"]
    assert [r["head"]["images_per_sec"][KEY] for r in paired["rounds"]] == [pytest.approx(80)] * 3
    again = paired["confirmation"]["rounds"]
    assert len(again) >= 2 and all(
        r["head"]["images_per_sec"][KEY] == pytest.approx(100) for r in again
    )
    assert paired["profile_rounds"] == []  # nothing is slower: nothing to explain
    # The first run's HEAD sides all came from one server; the second run's from a new one.
    parents = _parents(biased)
    assert len(parents) == 3 + len(again)
    assert len(set(parents[:3])) == 1 and set(parents[:3]).isdisjoint(parents[3:])
    assert len(worktrees(fake_pytester.path)) == 1


def test_without_the_second_run_the_first_decides(
    fake_pytester: pytest.Pytester, biased: Path
) -> None:
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json",
        "--mxperf-pair-confirm", "off",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    assert "second run" not in result.stdout.str()
    report = read_report(fake_pytester.path)
    assert report["cases"][0]["verdict"]["status"] == "regressed"
    assert report["paired"]["confirmation"] is None
    assert len(set(_parents(biased))) == 1


def test_an_arbitration_the_second_run_clears_is_the_machine(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    biased: Path,
) -> None:
    """Stored at the plain commit (100 img/s); HEAD measures 80 in the controller, so the pair
    arbitrates: its first run finds HEAD 20% slower, its second run on fresh processes finds
    the code the same, and the stored figure does not hold here."""
    fake_pytester.run("git", "checkout", "-q", "HEAD~1")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=1)
    fake_pytester.run("git", "checkout", "-q", "-")
    monkeypatch.setenv("MXPERF_TEST_CONTROLLER", "80")
    biased.unlink(missing_ok=True)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1)
    (case,) = read_report(fake_pytester.path)["cases"]
    verdict = case["verdict"]
    assert verdict["status"] == "machine", verdict["message"]
    message = verdict["message"]
    assert (
        "measured again on fresh processes after a first paired run found -20.0%" in message
        and "the code is not slower; the stored figure does not hold here" in message
        and "second run: 100.0/100.0, 100.0/100.0" in message
    ), message
    assert len(set(_parents(biased))) == 2
