"""Cases judged against their stored baselines, through pytester on real git repositories: the
regression message, tolerance, strict mode, and a hardware key without baselines."""

from __future__ import annotations

from typing import Callable

import pytest

from pytest_mxperf.testing.repos import (
    git,
    inflate_baselines,
    read_report,
    write_speeds,
)


def test_slower_model_fails_with_message(
    suite: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    base_sha = git(suite.path, "rev-parse", "HEAD")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    commit("store baseline")
    write_speeds(suite.path, alpha=400 / 1.4, beta=200)  # 40% more work per batch for alpha
    commit("make alpha slower")
    commit("unrelated")
    result = suite.runpytest("--mxperf", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*alpha/inference/float32/bs8/cpu: 285.7 img/s vs baseline 400.0 img/s (-28.6%), "
            "tolerance 5.0% (noise 0.0%); baseline commit "
            f"{base_sha[:10]} (*, 3 commit(s) before HEAD) on cpu-*",
            # re-measured once, as slow again: the paired run arbitrates, no third attempt
            "*measured 2 times (img/s: 285.7, 285.7); judged the best*",
            f"*confirmed by a paired run on this machine: HEAD vs baseline commit {base_sha[:10]}: "
            "-28.6% (99% interval *, * round(s))*",
            "*img/s per round (baseline commit/HEAD): 400.0/285.7, 400.0/285.7*",
            # the evidence below the paired run: operators, memory, what changed, commits
            "*top operators (baseline -> now):*",
            "*operator time: 20.00 -> 28.00 ms/step (+40%)*",
            "*FullyConnected: 1 -> 1 per step, 20.00 -> 28.00 ms/step (+40%), 100% of the change*",
            "*peak memory: 64.0 -> 64.0 MiB (+0%, cpu, declared)*",
            "*changed since the baseline: nothing recorded*",
            f"*commits since the baseline (git log --oneline {base_sha[:10]}..* -- *):*",
            "* make alpha slower*",
            "* store baseline*",
        ]
    )
    assert "unrelated" not in result.stdout.str()  # an empty commit touches no path
    junit = (suite.path / "junit.xml").read_text()
    assert 'failures="1"' in junit and "vs baseline 400.0 img/s" in junit


def test_message_names_software_and_environment_changes(
    stored_suite: pytest.Pytester, commit: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    commit("baseline")
    write_speeds(stored_suite.path, alpha=200, beta=200)
    monkeypatch.setenv("MXNET_ENGINE_TYPE", "NaiveEngine")
    result = stored_suite.runpytest("--mxperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*changed since the baseline: MXNET_ENGINE_TYPE: unset -> NaiveEngine*"]
    )


def test_within_tolerance_passes_and_faster_is_improved(stored_suite: pytest.Pytester) -> None:
    # -2%: inside half the 5% floor, so no paired run looks at it (see test_arbitration_flow.py)
    write_speeds(stored_suite.path, alpha=400 * 0.98, beta=200 * 1.5)
    result = stored_suite.runpytest("--mxperf", "--mxperf-allow-dirty")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*mxperf verdicts: 1 improved, 1 pass*"])
    assert "paired run" not in result.stdout.str()
    assert "another machine" not in result.stdout.str()  # stored here


def test_an_improvement_on_another_machines_baseline_says_the_machine_may_be_why(
    stored_suite: pytest.Pytester,
) -> None:
    # The stored figures halved, as if a machine half as fast stored them: both cases measure
    # twice their figures here, improved, and say that the machine may be the reason.
    inflate_baselines(stored_suite.path, 0.5, machine="0badc0ffee00")
    result = stored_suite.runpytest("--mxperf", "--mxperf-allow-dirty", "--mxperf-json", "r.json")
    result.assert_outcomes(passed=2)
    verdicts = [c["verdict"] for c in read_report(stored_suite.path, "r.json")["cases"]]
    assert [v["status"] for v in verdicts] == ["improved", "improved"]
    note = "the baseline was measured on another machine: this one may only be faster"
    assert all(note in v["message"] for v in verdicts)


def test_strict_fails_cases_without_baseline(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--mxperf", "--mxperf-strict")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*alpha/inference/float32/bs8/cpu: no baseline for hardware cpu-*"]
    )
    suite.runpytest("--mxperf").assert_outcomes(passed=2)


def test_hardware_mismatch_names_stored_keys(stored_suite: pytest.Pytester) -> None:
    result = stored_suite.runpytest("--mxperf", "--mxperf-machine", "ci-runner-a")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*mxperf verdicts: 2 new*",
            "*mxperf: no baselines for hardware ci-runner-a; stored for: cpu-* (see --mxperf-machine)*",
        ]
    )
    strict = stored_suite.runpytest(
        "--mxperf", "--mxperf-machine", "ci-runner-a", "--mxperf-strict"
    )
    strict.stdout.fnmatch_lines(
        ["*no baseline for hardware ci-runner-a (stored for: cpu-*; see --mxperf-machine)*"]
    )


BUSY_SUITE = """
from pytest_mxperf.testing import FakeModel

def test_busy(mxperf):
    mxperf.inference(FakeModel(100.0, busy_for={busy}), batch_size=8, model="busy")
"""


def test_a_case_too_spread_to_judge_is_measured_again(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], store_baseline: Callable[..., str]
) -> None:
    store_baseline(BUSY_SUITE.format(busy=0.0), passed=1)
    commit("baselines")
    # The machine busy through the first attempt's blocks: every third block 3x slower, the
    # others 0.8x (a median of 125 img/s, blocks 73% apart), then steady at 100.
    fake_pytester.makepyfile(test_suite=BUSY_SUITE.format(busy=8.0))
    # (its warm-up, never steady while busy, is rightly warned of as grown)
    quiet = ("-W", "ignore:mxperf:pytest.PytestWarning", "--mxperf-json", "r.json")
    once = fake_pytester.runpytest("--mxperf", "--mxperf-confirm", "0", *quiet)
    once.assert_outcomes(passed=1)
    (case,) = read_report(fake_pytester.path, "r.json")["cases"]
    assert case["verdict"]["status"] == "unstable" and case["measurement"]["rel_iqr"] > 0.25
    assert case["measurement"]["images_per_sec"] == pytest.approx(125.0)
    assert "too noisy to judge" in case["verdict"]["message"]
    # By default (--mxperf-confirm 2) it is measured again, and the steady attempt is judged.
    again = fake_pytester.runpytest("--mxperf", *quiet)
    again.assert_outcomes(passed=1)
    (case,) = read_report(fake_pytester.path, "r.json")["cases"]
    assert case["verdict"]["status"] == "pass" and case["attempts"] == pytest.approx([125, 100])
    assert case["measurement"]["rel_iqr"] <= 0.25
