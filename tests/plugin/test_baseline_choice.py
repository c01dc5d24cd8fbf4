"""Which stored baseline a case is compared with: the nearest ancestor, an explicit revision
(``--mxperf-compare``), and without history (shallow clone, no git)."""

from __future__ import annotations

import json

import pytest

from pytest_mxperf.testing.repos import (
    git,
    store_speeds,
    stored_files,
    write_speeds,
)


def test_nearest_ancestor_across_branches_and_merges(suite: pytest.Pytester) -> None:
    path = suite.path
    store_speeds(suite, alpha=1000, beta=1000)  # on main: far ancestor
    git(path, "checkout", "-qb", "feature")
    store_speeds(suite, alpha=400, beta=200)  # on feature: nearer ancestor
    git(path, "checkout", "-q", "main")
    git(path, "checkout", "-qb", "unrelated")
    write_speeds(suite.path, alpha=50, beta=50)
    git(path, "commit", "-qam", "unrelated speeds")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    unrelated = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "main")
    # Its baseline file stays in the working tree (untracked) but is never an ancestor.
    assert any(p.stem == unrelated for p in stored_files(suite.path))
    git(path, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    write_speeds(suite.path, alpha=400, beta=200)
    git(path, "commit", "-q", "--allow-empty", "-am", "same speed as feature")
    result = suite.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    cases = json.loads((path / "report.json").read_text())["cases"]
    feature_sha = git(path, "rev-parse", "feature~1")  # the commit its baseline was made at
    assert {c["verdict"]["baseline_commit"] for c in cases} == {feature_sha}
    assert {c["verdict"]["status"] for c in cases} == {"pass"}


def test_explicit_revision(suite: pytest.Pytester) -> None:
    path = suite.path
    store_speeds(suite, alpha=200, beta=100)
    old = git(path, "rev-parse", "HEAD~1")
    store_speeds(suite, alpha=400, beta=200)
    write_speeds(suite.path, alpha=400, beta=200)
    result = suite.runpytest("--mxperf", "--mxperf-compare", old[:8], "--mxperf-json", "r.json")
    result.assert_outcomes(passed=2)
    cases = json.loads((path / "r.json").read_text())["cases"]
    assert {c["verdict"]["baseline_commit"] for c in cases} == {old}
    assert {c["verdict"]["status"] for c in cases} == {"improved"}
    result.stdout.fnmatch_lines([f"*compared with {old[:8]}*"])


def test_shallow_clone_falls_back_to_newest_with_warning(
    suite: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    store_speeds(suite, alpha=400, beta=200)
    git(suite.path, "commit", "-q", "--allow-empty", "-m", "later")
    clone = tmp_path_factory.mktemp("shallow") / "repo"
    git(suite.path, "clone", "-q", "--depth", "1", f"file://{suite.path}", str(clone))
    assert (clone / "baselines").is_dir()
    result = suite.runpytest("--mxperf", "--rootdir", str(clone), str(clone / "test_suite.py"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*mxperf: warning: shallow clone: baselines for cpu-* chosen as the newest by commit date*",
            "*mxperf verdicts: 2 pass*",
        ]
    )


def test_no_git_falls_back_to_newest_with_warning(suite: pytest.Pytester) -> None:
    store_speeds(suite, alpha=400, beta=200)
    import shutil

    shutil.rmtree(suite.path / ".git")
    result = suite.runpytest("--mxperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*warning: no git history: baselines for cpu-* newest by commit date*"]
    )
    refused = suite.runpytest("--mxperf", "--mxperf-update")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*no git commit found*PYTEST_MXPERF_COMMIT*"])


def test_unknown_compare_revision_is_a_usage_error(suite: pytest.Pytester) -> None:
    store_speeds(suite, alpha=400, beta=200)
    result = suite.runpytest("--mxperf", "--mxperf-compare", "nonexistent-rev")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mxperf-compare 'nonexistent-rev': unknown revision*"])


def test_compare_with_a_commit_without_baseline_lists_those_with_one(
    suite: pytest.Pytester,
) -> None:
    store_speeds(suite, alpha=400, beta=200)
    stored_sha = stored_files(suite.path)[0].stem
    bare = git(suite.path, "rev-parse", "HEAD")  # a real commit, no file stored for it
    result = suite.runpytest("--mxperf", "--mxperf-compare", "HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*--mxperf-compare HEAD ({bare[:10]}) has no baseline for this hardware (cpu-*) under *; "
            f"commits that have one: {stored_sha[:10]}*"
        ]
    )
    other = suite.runpytest("--mxperf", "--mxperf-compare", stored_sha, "--mxperf-machine", "x")
    assert other.ret == pytest.ExitCode.USAGE_ERROR
    other.stderr.fnmatch_lines(
        ["*has no baseline for this hardware (x) under *; none is stored for it*"]
    )


def test_compare_without_git_matches_stored_shas_only(suite: pytest.Pytester) -> None:
    import shutil

    store_speeds(suite, alpha=400, beta=200)
    stored_sha = stored_files(suite.path)[0].stem
    shutil.rmtree(suite.path / ".git")
    result = suite.runpytest("--mxperf", "--mxperf-compare", "deadbeef")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'deadbeef': unknown revision (not a commit here (no git*"])
    ok = suite.runpytest("--mxperf", "--mxperf-compare", stored_sha[:8])
    ok.assert_outcomes(passed=2)
    ok.stdout.fnmatch_lines(["*mxperf verdicts: 2 pass*"])
