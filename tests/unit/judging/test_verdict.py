"""The verdict on a case: expectation floor, baseline comparison and its noise allowance."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.judging import explain
from pytest_mxperf.judging.changes import diff_stack, sides_line
from pytest_mxperf.judging.decisions import (
    Policy,
    compare_rates,
    noise_of,
    stored_threshold,
    suspected,
)
from pytest_mxperf.measuring.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.system import codec
from pytest_mxperf.testing import measurement_of

PASS, IMPROVED, REGRESSED = Outcome.PASS, Outcome.IMPROVED, Outcome.REGRESSED
UNSTABLE, NEW, BELOW = Outcome.UNSTABLE, Outcome.NEW, Outcome.BELOW
OOM, NAN, ERROR = Outcome.OOM, Outcome.NAN, Outcome.ERROR

HW = "cpu-amd-epyc-2c"
KEY = "resnet50_v1/inference/float32/bs32/cpu"
BASE_SHA = "0123456789abcdef0123456789abcdef01234567"
DEFAULT = Policy(tolerance=0.15, floor_tolerance=0.15)  # explicit: pinned tolerances
STRICT = Policy(tolerance=0.15, strict=True, floor_tolerance=0.15)
UPDATE = Policy(tolerance=0.15, update=True, floor_tolerance=0.15)


def judge(*args: Any, **kwargs: Any) -> Verdict:
    """`explain.judge`'s decision and message, as the verdict they make."""
    return explain.judge(*args, **kwargs).verdict()


def result(
    rate: float | None = 100.0,
    *,
    rel_iqr: float = 0.01,
    status: str = "ok",
    error: str | None = None,
    attempts: list[float] | None = None,
    software: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    threads: dict[str, Any] | None = None,
) -> CaseResult:
    return CaseResult(
        key=CaseKey.parse(KEY),
        device="cpu(0)",
        hardware=HW,
        status=Status(status),
        measurement=None if rate is None else measurement_of(rate, rel_iqr),
        attempts=attempts if attempts is not None else ([] if rate is None else [rate]),
        threads=threads if threads is not None else {"omp_threads": 1},
        software=software if software is not None else {"mxnet": "1.9.1", "numpy": "1.23.5"},
        environment=environment if environment is not None else {"OMP_NUM_THREADS": "1"},
        error=error,
    )


def baseline(
    rate: float | None = 100.0,
    *,
    rel_iqr: float = 0.01,
    runs: list[float] | None = None,
    distance: int | None = 3,
    how: str = "nearest ancestor",
    **case: Any,
) -> BaselineRef:
    record = {
        "images_per_sec": rate,
        "rel_iqr": rel_iqr,
        "runs": runs if runs is not None else ([] if rate is None else [rate]),
        "threads": {"omp_threads": 1},
        "software": {"mxnet": "1.9.1", "numpy": "1.23.5"},
        "environment": {"OMP_NUM_THREADS": "1"},
        **case,
    }
    return BaselineRef.from_dict(
        {
            "case": record,
            "commit": {"sha": BASE_SHA, "date": "2024-05-06T07:08:09+00:00"},
            "distance": distance,
            "how": how,
            "file": f"{HW}/{BASE_SHA}.json",
        }
    )


def expect(rate: float, tolerance: float | None = None, hardware: str = "cpu-*") -> Expectation:
    return Expectation(images_per_sec=rate, batch_size=32, hardware=hardware, tolerance=tolerance)


def test_nan() -> None:
    r = result(status="nan", error="model output contains NaN/inf (8 of 8 values)")
    v = judge(r, baseline(), [], UPDATE)
    assert (v.status, v.failed) == (NAN, True)
    assert v.message == f"{KEY}: model output contains NaN/inf (8 of 8 values)"


def test_error() -> None:
    r = result(None, status="error", error="MXNetError: boom")
    v = judge(r, None, [], DEFAULT)
    assert (v.status, v.failed) == (ERROR, True)
    assert "MXNetError: boom" in v.message


def test_oom_without_baseline_is_not_a_failure() -> None:
    v = judge(result(None, status="oom"), None, [expect(10.0)], STRICT)
    assert (v.status, v.failed) == (OOM, False)
    assert "out of memory at batch size 32" in v.message


def test_oom_when_the_baseline_was_oom_too() -> None:
    v = judge(result(None, status="oom"), baseline(None), [], DEFAULT)
    assert (v.status, v.failed) == (OOM, False)


def test_oom_where_the_baseline_ran_is_a_regression() -> None:
    v = judge(result(None, status="oom"), baseline(250.0), [], DEFAULT)
    assert (v.status, v.failed) == (REGRESSED, True)
    assert v.baseline_images_per_sec == 250.0
    assert v.baseline_commit == BASE_SHA
    assert "out of memory at batch size 32" in v.message
    assert "the baseline measured 250.0 img/s" in v.message
    assert "baseline commit 0123456789" in v.message
    assert "3 commit(s) before HEAD" in v.message
    # --mxperf-update stores the new state instead of failing
    v = judge(result(None, status="oom"), baseline(250.0), [], UPDATE)
    assert (v.status, v.failed) == (REGRESSED, False)


def test_below_expectation() -> None:
    v = judge(result(80.0), baseline(80.0), [expect(100.0)], DEFAULT)
    assert (v.status, v.failed) == (BELOW, True)
    assert v.expected == 100.0
    m = v.message
    assert "measured 80.0 img/s" in m
    assert "expected 100.0 img/s" in m
    assert "tolerance 15%" in m and "floor 85.0 img/s" in m
    assert f"on hardware {HW}" in m
    assert "hardware='cpu-*'" in m


def test_below_expectation_fails_even_in_update_mode() -> None:
    assert judge(result(80.0), None, [expect(100.0)], UPDATE).failed is True


def test_expectation_uses_its_own_tolerance() -> None:
    v = judge(result(80.0), None, [expect(100.0, tolerance=0.25)], DEFAULT)
    assert v.status == NEW  # 80 >= 75: above the marker's floor
    assert v.expected == 100.0
    v = judge(result(80.0), None, [expect(100.0, tolerance=0.1)], DEFAULT)
    assert v.status == BELOW
    assert "tolerance 10%" in v.message and "floor 90.0 img/s" in v.message


def test_any_failing_expectation_counts() -> None:
    v = judge(result(95.0), None, [expect(90.0), expect(200.0, hardware="cpu-*2c")], DEFAULT)
    assert v.status == BELOW
    assert v.expected == 200.0


def test_new_case() -> None:
    v = judge(result(), None, [], DEFAULT)
    assert (v.status, v.failed) == (NEW, False)
    assert v.message == f"{KEY}: no baseline for hardware {HW}"
    assert judge(result(), None, [], STRICT).failed is True
    assert judge(result(), None, [], Policy(strict=True, update=True)).failed is False


def test_new_case_names_other_hardware() -> None:
    v = judge(result(), None, [], DEFAULT, elsewhere=["gpu-b-x1", "cpu-a-4c"])
    assert "stored for: cpu-a-4c, gpu-b-x1" in v.message
    assert "--mxperf-machine" in v.message


def test_baseline_oom_now_runs_is_improved() -> None:
    v = judge(result(100.0), baseline(None), [], STRICT)
    assert (v.status, v.failed) == (IMPROVED, False)
    assert "runs now (100.0 img/s)" in v.message
    assert "baseline ran out of memory" in v.message
    assert v.baseline_commit == BASE_SHA


@pytest.mark.parametrize("rate", [100.0, 90.0, 86.0, 110.0, 114.0])
def test_pass_inside_tolerance(rate: float) -> None:
    v = judge(result(rate), baseline(100.0), [], STRICT)
    assert (v.status, v.failed) == (PASS, False)
    assert v.change == pytest.approx(rate / 100 - 1)
    assert v.threshold == 0.15
    assert v.baseline_images_per_sec == 100.0
    assert f"{rate:.1f} img/s vs baseline 100.0 img/s" in v.message


def test_regression_beyond_tolerance() -> None:
    r = result(
        80.0,
        software={"mxnet": "1.9.1", "numpy": "1.23.0"},
        environment={"OMP_NUM_THREADS": "1", "MXNET_CUDNN_AUTOTUNE_DEFAULT": "0"},
    )
    v = judge(r, baseline(100.0), [], DEFAULT)
    assert (v.status, v.failed) == (REGRESSED, True)
    assert v.change == pytest.approx(-0.2)
    assert v.threshold == 0.15
    m = v.message
    assert "80.0 img/s vs baseline 100.0 img/s (-20.0%)" in m
    assert "tolerance 15.0%" in m
    assert "baseline commit 0123456789 (2024-05-06T07:08:09+00:00, 3 commit(s) before HEAD)" in m
    assert f"on {HW}" in m
    assert "numpy: 1.23.5 -> 1.23.0" in m
    assert "MXNET_CUDNN_AUTOTUNE_DEFAULT: unset -> 0" in m
    assert "mxnet:" not in m  # unchanged lines are not listed


def test_regression_with_nothing_changed() -> None:
    v = judge(result(50.0), baseline(100.0), [], DEFAULT)
    assert "changed since the baseline: nothing recorded" in v.message


def test_regression_lists_thread_changes() -> None:
    r = result(50.0, threads={"omp_threads": 4})
    v = judge(r, baseline(100.0), [], DEFAULT)
    assert "omp_threads: 1 -> 4" in v.message


def test_the_usable_cpu_count_alone_is_no_change_of_threads() -> None:
    # Paired sides run pinned to fewer CPUs on purpose, never with another thread count.
    pinned = {"omp_threads": 1, "usable_cpus": 1, "source": "MXNet default"}
    unpinned = {"omp_threads": 1, "usable_cpus": 2, "source": "MXNet default"}
    assert sides_line(result(50.0, threads=pinned), result(50.0, threads=unpinned), "A") is None
    fewer = {**pinned, "omp_threads": 2}
    line = sides_line(result(50.0, threads=fewer), result(50.0, threads=unpinned), "A")
    assert line == "the sides ran different software (A -> HEAD): omp_threads: 2 -> 1"


def test_regression_against_a_baseline_chosen_by_date() -> None:
    v = judge(
        result(50.0), baseline(100.0, distance=None, how="newest by commit date"), [], DEFAULT
    )
    assert "chosen as newest by commit date" in v.message


def test_regression_lists_attempts() -> None:
    r = result(80.0, attempts=[78.25, 80.0, 79.5])
    v = judge(r, baseline(100.0), [], DEFAULT)
    assert "measured 3 times (img/s: 78.2, 80.0, 79.5); judged the best" in v.message
    single = judge(result(80.0), baseline(100.0), [], DEFAULT)
    assert "measured" not in single.message.split("\n", 1)[1]
    # The figure judged was not the fastest attempt (whose blocks spread too far): named.
    steady = judge(result(80.0, attempts=[91.0, 80.0, 79.5]), baseline(100.0), [], DEFAULT)
    assert "measured 3 times (img/s: 91.0, 80.0, 79.5); judged 80.0\n" in steady.message


def test_update_mode_never_fails_on_regression() -> None:
    v = judge(result(10.0), baseline(100.0), [], Policy(update=True, strict=True))
    assert (v.status, v.failed) == (REGRESSED, False)


def test_drop_inside_the_baselines_block_noise_is_not_a_regression() -> None:
    # baseline blocks spread 12%: threshold 24%, so -20% is inside the noise
    v = judge(result(80.0), baseline(100.0, rel_iqr=0.12), [], STRICT)
    assert (v.status, v.failed) == (PASS, False)
    assert v.noise == pytest.approx(0.12)
    assert v.threshold == pytest.approx(0.24)
    assert "(noise 12.0%)" in v.message


def test_drop_inside_the_current_block_noise_is_not_a_regression() -> None:
    v = judge(result(80.0, rel_iqr=0.11), baseline(100.0), [], STRICT)
    assert v.status == PASS
    assert v.threshold == pytest.approx(0.22)


def test_drop_inside_the_spread_of_baseline_runs_is_not_a_regression() -> None:
    # runs 80..120 around 100: range 40%, noise 20%, threshold 40%
    v = judge(result(70.0), baseline(100.0, runs=[80.0, 120.0, 100.0]), [], STRICT)
    assert (v.status, v.failed) == (PASS, False)
    assert v.noise == pytest.approx(0.2) and v.threshold == pytest.approx(0.4)
    # the same drop against a quiet baseline is a regression
    assert judge(result(70.0), baseline(100.0, runs=[100.0, 101.0]), [], STRICT).status == (
        REGRESSED
    )


def test_drop_beyond_the_noise_is_still_a_regression() -> None:
    v = judge(result(70.0), baseline(100.0, rel_iqr=0.12), [], DEFAULT)
    assert (v.status, v.failed) == (REGRESSED, True)


@pytest.mark.parametrize(
    ("current", "base", "runs"),
    [(0.3, 0.01, None), (0.01, 0.3, None), (0.01, 0.01, [40.0, 100.0, 160.0])],
)
def test_too_noisy_to_judge(current: float, base: float, runs: list[float] | None) -> None:
    r = result(50.0, rel_iqr=current)
    b = baseline(100.0, rel_iqr=base, runs=runs)
    v = judge(r, b, [], DEFAULT)
    assert (v.status, v.failed) == (UNSTABLE, False)
    assert "too noisy to judge" in v.message
    assert judge(r, b, [], STRICT).failed is True
    assert judge(r, b, [], Policy(strict=True, update=True)).failed is False


def test_unstable_from_current_rel_iqr_alone() -> None:
    v = judge(result(100.0, rel_iqr=0.26), baseline(100.0), [], DEFAULT)
    assert v.status == UNSTABLE
    assert "block spread 26.0%" in v.message
    assert judge(result(100.0, rel_iqr=0.24), baseline(100.0), [], DEFAULT).status == PASS


def test_improved() -> None:
    v = judge(result(130.0), baseline(100.0), [], STRICT)
    assert (v.status, v.failed) == (IMPROVED, False)
    assert v.change == pytest.approx(0.3)
    assert "faster than the baseline" in v.message
    assert "--mxperf-update" in v.message


def test_expected_reported_on_pass() -> None:
    v = judge(result(100.0), baseline(100.0), [expect(90.0)], DEFAULT)
    assert (v.status, v.expected) == (PASS, 90.0)


def test_verdict_as_dict() -> None:
    d = codec.to_dict(judge(result(80.0), baseline(100.0), [], DEFAULT))
    assert d["status"] == REGRESSED
    assert d["baseline_commit"] == BASE_SHA
    assert set(d) >= {"status", "failed", "message", "change", "threshold", "noise"}


def test_noise_of() -> None:
    assert noise_of(result(rel_iqr=0.03), None) == pytest.approx(0.03)
    assert noise_of(result(rel_iqr=0.03), baseline(rel_iqr=0.05)) == 0.05
    runs = baseline(runs=[95.0, 105.0, 100.0, 0.0])  # zero runs ignored
    assert noise_of(result(rel_iqr=0.0), runs) == pytest.approx(0.05)  # half the 10% range
    assert noise_of(result(rel_iqr=0.0), baseline(runs=[100.0])) == 0.01  # one run: no range


def test_stored_threshold_is_the_least_threshold_the_case_can_be_judged_at() -> None:
    policy = Policy(tolerance=0.05)
    for base in (baseline(rel_iqr=0.01), baseline(rel_iqr=0.08), baseline(runs=[80.0, 120.0])):
        least = stored_threshold(base.case, 0.05)
        # A case whose own blocks do not spread: exactly the stored part ...
        _, _, threshold = compare_rates(
            90.0, 100.0, noise_of(result(rel_iqr=0.0), base), 0.0, policy
        )
        assert least == pytest.approx(threshold)
        # ... and its own spread can only widen it.
        noisy = result(rel_iqr=0.09)
        _, _, wider = compare_rates(90.0, 100.0, noise_of(noisy, base), 0.09, policy)
        assert wider >= least
    assert stored_threshold(baseline(rel_iqr=0.01).case, 0.05) == 0.05  # the tolerance
    assert stored_threshold(baseline(rel_iqr=0.08).case, 0.05) == pytest.approx(0.16)
    assert stored_threshold(baseline(runs=[80.0, 120.0]).case, 0.05) == pytest.approx(0.4)


def test_diff_stack() -> None:
    old = {"mxnet": "1.9.1", "numpy": "1.23.5", "gone": "x"}
    new = {"mxnet": "1.9.1", "numpy": "1.24.0", "added": 1}
    assert diff_stack(old, new) == [
        "added: unset -> 1",
        "gone: x -> unset",
        "numpy: 1.23.5 -> 1.24.0",
    ]
    assert diff_stack(old, dict(old)) == []


def test_sides_line_names_what_the_two_sides_ran_differently() -> None:
    head = result(software={"mxnet": "1.9.1", "numpy": "1.23.5"})
    assert sides_line(result(), head, "main") is None
    rev = result(software={"mxnet": "1.8.0", "numpy": "1.23.5"}, threads={"omp_threads": 2})
    assert sides_line(rev, head, "main") == (
        "the sides ran different software (main -> HEAD): mxnet: 1.8.0 -> 1.9.1, "
        "omp_threads: 2 -> 1"
    )


def test_case_result_round_trip() -> None:
    r = result(80.0, attempts=[70.0, 80.0])
    r = replace(r, verdict=judge(r, baseline(100.0), [], DEFAULT))
    assert codec.from_dict(CaseResult, {**codec.to_dict(r), "unknown": 1}) == r
    assert r.images_per_sec == 80.0 and r.rel_iqr == pytest.approx(0.01)
    assert result(None, status="oom").images_per_sec is None
    assert result(None, status="oom").rel_iqr == 0.0


def test_blocks_too_noisy_to_judge_still_show_a_drop_far_beyond_their_spread() -> None:
    policy = Policy(tolerance=0.20)
    # Blocks 29% apart: a 30% drop is inside what that noise can do, so no verdict ...
    outcome, failed, _ = compare_rates(70.0, 100.0, 0.29, 0.29, policy)
    assert (outcome, failed) == (Outcome.UNSTABLE, False)
    # ... but an 88% drop is three times the spread: a regression, with the wider threshold.
    outcome, failed, threshold = compare_rates(12.0, 100.0, 0.29, 0.29, policy)
    assert (outcome, failed) == (Outcome.REGRESSED, True)
    assert threshold == pytest.approx(0.58)
    # Spread beyond 50%: even a halving is no evidence.
    outcome, _, _ = compare_rates(50.0, 100.0, 0.6, 0.6, policy)
    assert outcome == Outcome.UNSTABLE


@pytest.mark.parametrize(
    ("outcome", "change", "wanted"),
    [
        (Outcome.REGRESSED, -0.30, True),
        (Outcome.PASS, -0.03, True),  # below half the 5% floor: a pair looks at it
        (Outcome.UNSTABLE, -0.04, True),
        (Outcome.PASS, -0.02, False),  # within half the floor: not worth a pair
        (Outcome.PASS, None, False),
        (Outcome.IMPROVED, 0.10, False),
        (Outcome.NEW, None, False),
        (Outcome.BELOW, -0.40, False),  # a marker's floor has no baseline commit to pair
    ],
)
def test_which_stored_verdicts_are_worth_a_pair(
    outcome: Outcome, change: float | None, wanted: bool
) -> None:
    verdict = Verdict(outcome=outcome, failed=outcome == Outcome.REGRESSED, change=change)
    assert suspected(verdict, tolerance=0.05) is wanted


@pytest.mark.parametrize(
    ("change", "machine", "wanted"),
    [
        (-0.04, None, True),  # no probe: half the floor
        (-0.04, 1.0, True),  # the machine as fast as when stored
        (-0.04, 1.05, True),  # faster now: nothing discounted
        (-0.04, 0.97, False),  # 3% of the 4% is the machine's slower hour
        (-0.06, 0.97, True),
        (-0.045, 0.90, False),  # discounted by half the floor at most ...
        (-0.051, 0.90, True),  # ... so a drop beyond the floor is paired on any machine
    ],
)
def test_a_slower_machine_discounts_a_passing_drop_up_to_half_the_floor(
    change: float, machine: float | None, wanted: bool
) -> None:
    verdict = Verdict(outcome=Outcome.PASS, failed=False, change=change)
    assert suspected(verdict, tolerance=0.05, machine=machine) is wanted
    regressed = Verdict(outcome=Outcome.REGRESSED, failed=True, change=change)
    assert suspected(regressed, tolerance=0.05, machine=machine)


@pytest.mark.parametrize(
    ("change", "machine", "explained", "wanted"),
    [
        (-0.09, 0.90, None, True),  # the cap is half the floor: paired beyond -5%
        (-0.09, 0.90, 0.12, False),  # pairs showed the hour explains 12%: 10% discounted
        (-0.13, 0.90, 0.12, True),  # 3% beyond the hour: paired
        (-0.09, 1.0, 0.12, True),  # an explained hour discounts nothing on a steady machine
        (-0.16, 0.85, 0.12, True),  # the discount is at most what the pairs explained
    ],
)
def test_an_hour_the_pairs_confirmed_discounts_up_to_what_they_explained(
    change: float, machine: float, explained: float | None, wanted: bool
) -> None:
    verdict = Verdict(outcome=Outcome.PASS, failed=False, change=change)
    assert suspected(verdict, 0.05, machine, explained) is wanted
    regressed = Verdict(outcome=Outcome.REGRESSED, failed=True, change=change)
    assert suspected(regressed, 0.05, machine, explained)
