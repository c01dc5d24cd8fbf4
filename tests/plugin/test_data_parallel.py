"""``mxperf.data_parallel`` through pytester with the fake back end (exact figures): the case key
and table, the efficiency marker, a scaling regression against a stored baseline naming the
kvstore share, a dead worker failing only its case, multi-GPU hardware keys."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from pytest_mxperf.testing.repos import cases_by_key

SUITE = """
import os
import pytest
from pytest_mxperf.testing import FakeModel

SCALING = float(os.environ.get("FAKE_SCALING", "0.9"))


def toy():
    return FakeModel(images_per_sec=300.0, scaling=SCALING)


@pytest.mark.mxperf(efficiency={2: float(os.environ.get("FAKE_FLOOR", "0.5"))})
def test_dist(mxperf):
    r = mxperf.data_parallel("test_suite:toy", batch_size=8, workers=2, model="toy")
    assert r.scaling.world_size == 2


def test_plain(mxperf):
    mxperf.training(FakeModel(images_per_sec=300.0), batch_size=8, model="toy")
"""


def _cases(pytester: pytest.Pytester) -> dict[str, Any]:
    return cases_by_key(pytester.path)


def test_dist_case_reports_aggregate_per_worker_and_efficiency(
    fake_pytester: pytest.Pytester,
) -> None:
    fake_pytester.makepyfile(test_suite=SUITE)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*mxperf: data-parallel scaling (weak: same batch per device)*",
            # 80 columns: img/s(1), the stored efficiency and threads are dropped (JSON has all)
            "case*devices*img/s*efficiency*per worker*kv share",
            "toy ?dist_sync?*2*180.0*90.0%*90.0 90.0*10%",
        ]
    )
    case = _cases(fake_pytester)["toy/training/float32/bs8/cpu/x2/dist_sync"]
    assert case["device"] == "2x cpu(0)"
    assert case["measurement"]["block_images_per_sec"][2] == pytest.approx(180.0)
    s = case["scaling"]
    assert s["per_worker_images_per_sec"] == pytest.approx([90.0, 90.0])
    assert s["single_images_per_sec"] == pytest.approx(100.0)
    assert s["efficiency"] == pytest.approx(0.9)
    assert s["comm_share"] == pytest.approx(0.1)
    assert s["kvstore"] == "dist_sync" and s["world_size"] == 2
    assert case["verdict"]["status"] == "new"


def test_efficiency_below_the_markers_floor_fails(
    fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_pytester.makepyfile(test_suite=SUITE)
    monkeypatch.setenv("FAKE_FLOOR", "0.95")
    result = fake_pytester.runpytest("--mxperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*toy/training/float32/bs8/cpu/x2/dist_sync: scaling efficiency 90.0% at world size"
            " 2 is below the marker's floor 95.0% on hardware cpu-*",
            "*kvstore (dist_sync) share of a step: 10%*",
        ]
    )


def test_bad_efficiency_marker_is_a_usage_error(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        import pytest
        @pytest.mark.mxperf(efficiency={1: 0.9})
        def test_a(mxperf):
            pass
        """
    )
    result = fake_pytester.runpytest("--mxperf")
    result.stderr.fnmatch_lines(["*test_a*efficiency: world size must be an int >= 2, got 1*"])


def test_scaling_drop_against_stored_baseline_names_the_kvstore_share(
    fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_pytester.makepyfile(test_suite=SUITE)
    monkeypatch.setenv("PYTEST_MXPERF_COMMIT", "a" * 40)
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    stored = next((fake_pytester.path / "baselines").glob("*/*.json"))
    case = json.loads(stored.read_text())["cases"]["toy/training/float32/bs8/cpu/x2/dist_sync"]
    assert case["efficiency"] == pytest.approx(0.9) and case["comm_share"] == pytest.approx(0.1)
    assert case["images_per_sec"] == pytest.approx(180.0)
    # Same single-device speed, more time in exchange: efficiency 0.9 -> 0.6.
    monkeypatch.setenv("FAKE_SCALING", "0.6")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*toy/training/float32/bs8/cpu/x2/dist_sync: scaling efficiency 60.0% vs baseline "
            "90.0% (-33.3%), tolerance 20.0%; baseline commit aaaaaaaaaa*",
            "*kvstore (dist_sync) share of a step: 10% -> 40%: scaling dropped because "
            "communication grew (efficiency 90.0% -> 60.0%)",
            "*aggregate: *120.0 img/s vs baseline 180.0 img/s (-33.3%)*",
        ]
    )
    verdict = _cases(fake_pytester)["toy/training/float32/bs8/cpu/x2/dist_sync"]["verdict"]
    assert verdict["status"] == "regressed" and verdict["scaling"] is True
    assert verdict["baseline_efficiency"] == pytest.approx(0.9)
    assert verdict["efficiency_change"] == pytest.approx(0.6 / 0.9 - 1)


def test_a_dead_worker_fails_only_its_case_with_its_output(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeModel

        def test_dead(mxperf):
            r = mxperf.data_parallel(
                FakeModel(300.0, rank_failure="ps-lite: kv_app.h:624 Check failed"),
                batch_size=8, kvstore="local", contexts=["cpu(0)", "cpu(1)"], model="dead",
            )
            # Not reached: the errored case fails the test at the call, with the rank's
            # message (this check would have hidden it behind a TypeError).
            assert r.images_per_sec > 0

        def test_after(mxperf):
            mxperf.training(FakeModel(images_per_sec=300.0), batch_size=8, model="after")
        """
    )
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*dead/training/float32/bs8/cpu/x2/local: worker 1 (pid 0) of local*SIGKILL*",
            "*kv_app.h:624 Check failed*",
        ]
    )
    assert "TypeError" not in result.stdout.str()
    report = fake_pytester.path / "report.json"
    assert report.is_file()
    cases = _cases(fake_pytester)
    assert cases["dead/training/float32/bs8/cpu/x2/local"]["status"] == "error"
    assert cases["after/training/float32/bs8/cpu"]["status"] == "ok"


def test_in_process_gpus_count_in_the_hardware_key(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makeconftest(
        """
        import pytest
        from pytest_mxperf.testing import FakeBackend

        @pytest.fixture(scope="session")
        def mxperf_backend():
            return FakeBackend(gpus=4)
        """
    )
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeContext, FakeModel

        def test_nccl(mxperf):
            ctxs = [FakeContext("gpu", i) for i in range(4)]
            mxperf.data_parallel(
                FakeModel(800.0, scaling=0.95), batch_size=32, kvstore="nccl",
                contexts=ctxs, model="r50",
            )
        """
    )
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-json", "report.json", "--mxperf-machine", "ci-box"
    )
    result.assert_outcomes(passed=1)
    (case,) = _cases(fake_pytester).values()
    assert case["key"] == "r50/training/float32/bs32/gpu/x4/nccl"
    assert case["hardware"] == "ci-box-gpu-x4"
    assert case["device"] == "gpu(0,1,2,3)"
    assert case["scaling"]["efficiency"] == pytest.approx(0.95)


def test_paired_mode_judges_a_data_parallel_case_like_any_case(
    fake_pytester: pytest.Pytester, commit: Any
) -> None:
    suite = """
from pytest_mxperf.testing import FakeModel

def test_dist(mxperf):
    mxperf.data_parallel(
        FakeModel(300.0, scaling={s}), batch_size=8, kvstore="local",
        contexts=["cpu(0)", "cpu(1)"], model="toy",
    )
"""
    fake_pytester.makepyfile(test_suite=suite.format(s=0.9))
    commit("base")
    fake_pytester.makepyfile(test_suite=suite.format(s=0.6))
    commit("more exchange")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*toy/training/float32/bs8/cpu/x2/local: HEAD vs HEAD~1: -33.3%*slower*"]
    )
    case = _cases(fake_pytester)["toy/training/float32/bs8/cpu/x2/local"]
    assert case["verdict"]["status"] == "regressed"
    # The side processes' results carry the scaling record through to the report.
    assert case["scaling"]["efficiency"] == pytest.approx(0.6)
    assert case["scaling"]["comm_share"] == pytest.approx(0.4)


EFFICIENCY_ONLY = """
from pytest_mxperf.testing import FakeModel

def test_dist(mxperf):
    mxperf.data_parallel(
        FakeModel({speed}, scaling={s}), batch_size=8, kvstore="local",
        contexts=["cpu(0)", "cpu(1)"], model="toy",
    )
"""
# One device 1.5x faster, the exchange share 10% -> 40%: the same aggregate img/s (180), the
# efficiency 90% -> 60%.
BASE_SCALING, WORSE_SCALING = {"speed": 300.0, "s": 0.9}, {"speed": 450.0, "s": 0.6}
KEY = "toy/training/float32/bs8/cpu/x2/local"


def test_paired_mode_pairs_the_efficiency_when_the_aggregate_holds(
    fake_pytester: pytest.Pytester, commit: Any
) -> None:
    fake_pytester.makepyfile(test_suite=EFFICIENCY_ONLY.format(**BASE_SCALING))
    commit("base")
    fake_pytester.makepyfile(test_suite=EFFICIENCY_ONLY.format(**WORSE_SCALING))
    commit("faster device, more exchange")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*{KEY}: scaling efficiency HEAD vs HEAD~1: -33.3%*lower*",
            "*efficiency per round (HEAD~1/HEAD): 90.0%/60.0%, 90.0%/60.0%*",
            "*kvstore (local) share of a step (HEAD~1 -> HEAD): 10% -> 40%: scaling dropped "
            "because communication grew*",
            "*aggregate: *HEAD vs HEAD~1: +0.0%*",
        ]
    )
    verdict = _cases(fake_pytester)[KEY]["verdict"]
    assert verdict["status"] == "regressed" and verdict["scaling"] is True
    assert verdict["baseline_efficiency"] == pytest.approx(0.9)
    assert verdict["efficiency_change"] == pytest.approx(0.6 / 0.9 - 1)


def test_paired_mode_passes_a_data_parallel_case_that_did_not_change(
    fake_pytester: pytest.Pytester, commit: Any
) -> None:
    fake_pytester.makepyfile(test_suite=EFFICIENCY_ONLY.format(**BASE_SCALING))
    commit("base")
    commit("nothing")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=1)
    verdict = _cases(fake_pytester)[KEY]["verdict"]
    assert verdict["status"] == "pass" and verdict["scaling"] is False
    assert "scaling efficiency HEAD vs HEAD~1: +0.0%" in verdict["message"]
    assert verdict["baseline_efficiency"] == pytest.approx(0.9)


def test_arbitration_of_a_scaling_regression_pairs_the_efficiency(
    fake_pytester: pytest.Pytester, store_baseline: Any, commit: Any
) -> None:
    store_baseline(EFFICIENCY_ONLY.format(**BASE_SCALING), passed=1, message="base")
    fake_pytester.makepyfile(test_suite=EFFICIENCY_ONLY.format(**WORSE_SCALING))
    commit("faster device, more exchange")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    # The pair's aggregate img/s is the same: judged on it, the stored regression would be
    # cleared as a figure that does not hold here.
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*{KEY}: scaling efficiency 60.0% vs baseline 90.0% (-33.3%)*",
            "*confirmed by a paired run on this machine: scaling efficiency HEAD vs baseline "
            "commit *: -33.3%*",
            "*scaling efficiency per round (baseline commit/HEAD): 90.0%/60.0%*",
        ]
    )
    verdict = _cases(fake_pytester)[KEY]["verdict"]
    assert verdict["status"] == "regressed" and verdict["scaling"] is True


BUSY_SUITE = """
import os
from pytest_mxperf.testing import FakeModel


def toy():
    busy = int(os.environ.get("FAKE_BUSY", "0"))
    return FakeModel(images_per_sec=300.0, scaling=0.9, busy_launches=busy)


def test_dist(mxperf):
    mxperf.data_parallel("test_suite:toy", batch_size=8, workers=2, model="toy")
"""


def test_a_data_parallel_case_too_spread_to_judge_is_launched_again(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_pytester.makepyfile(test_suite=BUSY_SUITE)
    commit("suite")
    stored = fake_pytester.runpytest("--mxperf", "--mxperf-update")
    stored.assert_outcomes(passed=1)
    # The first launch of each run on a busy machine: every worker's blocks +-90%.
    monkeypatch.setenv("FAKE_BUSY", "1")
    key = "toy/training/float32/bs8/cpu/x2/dist_sync"
    fake_pytester.runpytest("--mxperf", "--mxperf-confirm", "0", "--mxperf-json", "report.json")
    once = _cases(fake_pytester)[key]
    assert once["verdict"]["status"] == "unstable" and once["measurement"]["rel_iqr"] > 0.25
    # By default it is launched again, and the steady attempt is judged.
    fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json").assert_outcomes(passed=1)
    again = _cases(fake_pytester)[key]
    assert again["verdict"]["status"] == "pass" and len(again["attempts"]) == 2
    assert again["measurement"]["rel_iqr"] <= 0.25
