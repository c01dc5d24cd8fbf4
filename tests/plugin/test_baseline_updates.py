"""Storing baselines (``--mxperf-update``), through pytester on real git repositories: files per
hardware and commit, merging, dirty trees, what is and is not stored, Ctrl-C."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

import pytest_mxperf
from pytest_mxperf.testing.repos import (
    SPEEDS_SUITE,
    git,
    stored_files,
    write_speeds,
)


def test_update_then_identical_rerun_passes(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--mxperf", "--mxperf-update")
    result.assert_outcomes(passed=2)
    files = stored_files(suite.path)
    assert len(files) == 1
    sha = git(suite.path, "rev-parse", "HEAD")
    assert files[0].name == f"{sha}.json" and files[0].parent.name.startswith("cpu-")
    data = json.loads(files[0].read_text())
    assert data["schema"] == 1 and data["commit"]["sha"] == sha
    assert data["commit"]["dirty"] is False and data["commit"]["branch"] == "main"
    assert sorted(data["cases"]) == [
        "alpha/inference/float32/bs8/cpu",
        "beta/inference/float32/bs8/cpu",
    ]
    assert data["cases"]["alpha/inference/float32/bs8/cpu"]["images_per_sec"] == pytest.approx(400)
    versions = {case["pytest_mxperf_version"] for case in data["cases"].values()}
    assert versions == {pytest_mxperf.__version__}
    text = files[0].read_text()
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    result.stdout.fnmatch_lines(["*mxperf: baseline written: *baselines/cpu-*.json (2 case(s))*"])

    again = suite.runpytest("--mxperf")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["*mxperf verdicts: 2 pass*"])
    assert again.ret == pytest.ExitCode.OK


def test_dirty_tree_refused_unless_allowed(suite: pytest.Pytester) -> None:
    (suite.path / "test_suite.py").write_text(SPEEDS_SUITE + "\n# edited\n")
    result = suite.runpytest("--mxperf", "--mxperf-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--mxperf-update: the working tree of * has uncommitted changes*"]
    )
    assert stored_files(suite.path) == []
    ok = suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-allow-dirty")
    ok.assert_outcomes(passed=2)
    data = json.loads(stored_files(suite.path)[0].read_text())
    assert data["commit"]["dirty"] is True
    assert all(case["dirty"] for case in data["cases"].values())


def test_untracked_baselines_do_not_make_the_tree_dirty(stored_suite: pytest.Pytester) -> None:
    git(stored_suite.path, "add", "baselines")  # staged but not committed: still not "dirty"
    stored_suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)


def test_update_merges_with_existing_cases(stored_suite: pytest.Pytester) -> None:
    write_speeds(stored_suite.path, alpha=500, beta=200)
    stored_suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-allow-dirty", "-k", "alpha")
    data = json.loads(stored_files(stored_suite.path)[0].read_text())
    alpha = data["cases"]["alpha/inference/float32/bs8/cpu"]
    assert alpha["runs"] == pytest.approx([400, 500])
    assert alpha["images_per_sec"] == pytest.approx(450)  # the median of the runs
    assert alpha["last_images_per_sec"] == pytest.approx(500)
    assert data["cases"]["beta/inference/float32/bs8/cpu"]["images_per_sec"] == pytest.approx(200)


def test_regression_does_not_fail_in_update_mode(
    stored_suite: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    commit("baseline")
    write_speeds(stored_suite.path, alpha=100, beta=200)
    commit("slower")
    stored_suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    assert len(stored_files(stored_suite.path)) == 2


def test_machine_override_from_env(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_MXPERF_MACHINE", "fleet-x")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    assert [p.parent.name for p in stored_files(suite.path)] == ["fleet-x"]


def test_ci_variables_name_the_commit(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = git(suite.path, "rev-parse", "HEAD")
    monkeypatch.setenv("GITHUB_SHA", sha)
    monkeypatch.setenv("GITHUB_REF_NAME", "ci-branch")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    data = json.loads(stored_files(suite.path)[0].read_text())
    assert data["commit"]["source"] == "env:GITHUB_SHA" and data["commit"]["branch"] == "ci-branch"


def test_too_noisy_cases_are_not_stored(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeModel
        def test_noisy(mxperf):
            r = mxperf.inference(FakeModel(40.0, jitter=0.9, seed=3), batch_size=8, model="noisy")
            assert r.rel_iqr > 0.25
        def test_calm(mxperf):
            mxperf.inference(FakeModel(40.0), batch_size=8, model="calm")
        """
    )
    commit("suite")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-update")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*not stored as baseline: noisy/inference/float32/bs8/cpu (block spread *%, too noisy)*"]
    )
    (path,) = (fake_pytester.path / "baselines").rglob("*.json")
    assert list(json.loads(path.read_text())["cases"]) == ["calm/inference/float32/bs8/cpu"]


def test_an_update_stores_the_steady_attempt_of_a_case(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    # Busy through the first of three attempts (every third block 3x slower, the others 0.8x):
    # the fastest median (125 img/s), but too spread to store; the steady 100 is stored.
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeModel
        def test_busy(mxperf):
            mxperf.inference(FakeModel(100.0, busy_for=8.0), batch_size=8, model="busy")
        """
    )
    commit("suite")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-update", "-W", "ignore:mxperf:pytest.PytestWarning"
    )
    result.assert_outcomes(passed=1)
    assert "not stored as baseline" not in result.stdout.str()
    (path,) = (fake_pytester.path / "baselines").rglob("*.json")
    (case,) = json.loads(path.read_text())["cases"].values()
    assert case["rel_iqr"] <= 0.25 and case["images_per_sec"] == pytest.approx(100.0)


def test_ctrl_c_during_update_stores_nothing(stored_suite: pytest.Pytester) -> None:
    (before,) = stored_files(stored_suite.path)
    text = before.read_text()
    write_speeds(stored_suite.path, alpha=1, beta=1)
    stored_suite.makepyfile(test_zz_interrupt="def test_stop():\n    raise KeyboardInterrupt\n")
    # A subprocess: an in-process run would pass the interrupt on to this session.
    result = stored_suite.runpytest_subprocess(
        "--mxperf", "--mxperf-update", "--mxperf-allow-dirty"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*run interrupted: baselines not updated*"])
    assert stored_files(stored_suite.path) == [before] and before.read_text() == text


def test_stored_environment_holds_no_paths(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = str(Path.home() / ".mxnet")
    monkeypatch.setenv("MXNET_HOME", home)
    monkeypatch.setenv("MXNET_CPU_WORKER_NTHREADS", "2")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    text = stored_files(suite.path)[0].read_text()
    assert home not in text and str(Path.home()) not in text
    case = json.loads(text)["cases"]["alpha/inference/float32/bs8/cpu"]
    assert "MXNET_HOME" not in case["environment"]  # a place, not a performance setting
    assert case["environment"]["MXNET_CPU_WORKER_NTHREADS"] == "2"


def test_clean_update_after_a_dirty_one_keeps_only_clean_runs(suite: pytest.Pytester) -> None:
    write_speeds(suite.path, alpha=900, beta=900)  # uncommitted: the tree is dirty
    dirty = suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-allow-dirty")
    dirty.assert_outcomes(passed=2)
    git(suite.path, "checkout", "--", "speed.txt")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    data = json.loads(stored_files(suite.path)[0].read_text())
    case = data["cases"]["alpha/inference/float32/bs8/cpu"]
    assert data["commit"]["dirty"] is False and case["dirty"] is False
    assert case["runs"] == [pytest.approx(400.0)]
    assert case["images_per_sec"] == pytest.approx(400.0)
