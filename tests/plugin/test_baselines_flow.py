"""Baselines keyed by hardware and commit, through pytester on real git repositories."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Callable

import pytest

from pytest_mxperf import cli
from pytest_mxperf.testing.repos import git

SUITE = """
import pathlib
import pytest
from pytest_mxperf.testing import FakeModel

SPEED = {k: float(v) for k, v in (
    line.split("=") for line in pathlib.Path(__file__).with_name("speed.txt").read_text().split()
)}

@pytest.mark.parametrize("model", sorted(SPEED))
def test_model(mxperf, model):
    mxperf.inference(FakeModel(images_per_sec=SPEED[model]), batch_size=8, model=model)
"""


def write_speeds(pytester: pytest.Pytester, **speeds: float) -> None:
    (pytester.path / "speed.txt").write_text(" ".join(f"{k}={v}" for k, v in speeds.items()))


@pytest.fixture
def suite(fake_pytester: pytest.Pytester, commit: Callable[[str], str]) -> pytest.Pytester:
    fake_pytester.makepyfile(test_suite=SUITE)
    write_speeds(fake_pytester, alpha=400, beta=200)
    commit("suite")
    return fake_pytester


def stored(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "baselines").glob("*/*.json"))


def test_update_then_identical_rerun_passes(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--mxperf", "--mxperf-update")
    result.assert_outcomes(passed=2)
    files = stored(suite)
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
    text = files[0].read_text()
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    result.stdout.fnmatch_lines(["*mxperf: baseline written: *baselines/cpu-*.json (2 case(s))*"])

    again = suite.runpytest("--mxperf")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["*mxperf verdicts: 2 pass*"])
    assert again.ret == pytest.ExitCode.OK


def test_slower_model_fails_with_message(
    suite: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    base_sha = git(suite.path, "rev-parse", "HEAD")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    commit("store baseline")
    write_speeds(suite, alpha=400 / 1.4, beta=200)  # 40% more work per batch for alpha
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
            "*measured 3 times (img/s: 285.7, 285.7, 285.7); judged the best*",
            f"*confirmed by a paired run on this machine: HEAD vs baseline commit {base_sha[:10]}: "
            "-28.6% (99% interval *, 3 round(s))*",
            "*img/s per round (baseline commit/HEAD): 400.0/285.7, 400.0/285.7, 400.0/285.7*",
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
    suite: pytest.Pytester, commit: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    commit("baseline")
    write_speeds(suite, alpha=200, beta=200)
    monkeypatch.setenv("MXNET_ENGINE_TYPE", "NaiveEngine")
    result = suite.runpytest("--mxperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*changed since the baseline: MXNET_ENGINE_TYPE: unset -> NaiveEngine*"]
    )


def test_within_tolerance_passes_and_faster_is_improved(suite: pytest.Pytester) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    # -2%: inside half the 5% floor, so no paired run looks at it (see test_paired_runs.py)
    write_speeds(suite, alpha=400 * 0.98, beta=200 * 1.5)
    result = suite.runpytest("--mxperf", "--mxperf-allow-dirty")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*mxperf verdicts: 1 improved, 1 pass*"])
    assert "paired run" not in result.stdout.str()


def test_strict_fails_cases_without_baseline(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--mxperf", "--mxperf-strict")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*alpha/inference/float32/bs8/cpu: no baseline for hardware cpu-*"]
    )
    suite.runpytest("--mxperf").assert_outcomes(passed=2)


def test_dirty_tree_refused_unless_allowed(suite: pytest.Pytester) -> None:
    (suite.path / "test_suite.py").write_text(SUITE + "\n# edited\n")
    result = suite.runpytest("--mxperf", "--mxperf-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--mxperf-update: the working tree of * has uncommitted changes*"]
    )
    assert stored(suite) == []
    ok = suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-allow-dirty")
    ok.assert_outcomes(passed=2)
    data = json.loads(stored(suite)[0].read_text())
    assert data["commit"]["dirty"] is True
    assert all(case["dirty"] for case in data["cases"].values())


def test_untracked_baselines_do_not_make_the_tree_dirty(suite: pytest.Pytester) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    git(suite.path, "add", "baselines")  # staged but not committed: still not "dirty"
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)


def test_update_merges_with_existing_cases(suite: pytest.Pytester) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    write_speeds(suite, alpha=500, beta=200)
    suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-allow-dirty", "-k", "alpha")
    data = json.loads(stored(suite)[0].read_text())
    alpha = data["cases"]["alpha/inference/float32/bs8/cpu"]
    assert alpha["runs"] == pytest.approx([400, 500])
    assert alpha["images_per_sec"] == pytest.approx(450)  # the median of the runs
    assert alpha["last_images_per_sec"] == pytest.approx(500)
    assert data["cases"]["beta/inference/float32/bs8/cpu"]["images_per_sec"] == pytest.approx(200)


def test_regression_does_not_fail_in_update_mode(
    suite: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    commit("baseline")
    write_speeds(suite, alpha=100, beta=200)
    commit("slower")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    assert len(stored(suite)) == 2


def _make_baseline(pytester: pytest.Pytester, **speeds: float) -> None:
    write_speeds(pytester, **speeds)
    git(pytester.path, "commit", "-q", "--allow-empty", "-am", "speeds")
    pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "store baseline")


def test_nearest_ancestor_across_branches_and_merges(suite: pytest.Pytester) -> None:
    path = suite.path
    _make_baseline(suite, alpha=1000, beta=1000)  # on main: far ancestor
    git(path, "checkout", "-qb", "feature")
    _make_baseline(suite, alpha=400, beta=200)  # on feature: nearer ancestor
    git(path, "checkout", "-q", "main")
    git(path, "checkout", "-qb", "unrelated")
    write_speeds(suite, alpha=50, beta=50)
    git(path, "commit", "-qam", "unrelated speeds")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    unrelated = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "main")
    # Its baseline file stays in the working tree (untracked) but is never an ancestor.
    assert any(p.stem == unrelated for p in stored(suite))
    git(path, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    write_speeds(suite, alpha=400, beta=200)
    git(path, "commit", "-q", "--allow-empty", "-am", "same speed as feature")
    result = suite.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    cases = json.loads((path / "report.json").read_text())["cases"]
    feature_sha = git(path, "rev-parse", "feature~1")  # the commit its baseline was made at
    assert {c["verdict"]["baseline_commit"] for c in cases} == {feature_sha}
    assert {c["verdict"]["status"] for c in cases} == {"pass"}


def test_explicit_revision(suite: pytest.Pytester) -> None:
    path = suite.path
    _make_baseline(suite, alpha=200, beta=100)
    old = git(path, "rev-parse", "HEAD~1")
    _make_baseline(suite, alpha=400, beta=200)
    write_speeds(suite, alpha=400, beta=200)
    result = suite.runpytest("--mxperf", "--mxperf-compare", old[:8], "--mxperf-json", "r.json")
    result.assert_outcomes(passed=2)
    cases = json.loads((path / "r.json").read_text())["cases"]
    assert {c["verdict"]["baseline_commit"] for c in cases} == {old}
    assert {c["verdict"]["status"] for c in cases} == {"improved"}
    result.stdout.fnmatch_lines([f"*compared with {old[:8]}*"])


def test_shallow_clone_falls_back_to_newest_with_warning(
    suite: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _make_baseline(suite, alpha=400, beta=200)
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
    _make_baseline(suite, alpha=400, beta=200)
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


def test_hardware_mismatch_names_stored_keys(suite: pytest.Pytester) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    result = suite.runpytest("--mxperf", "--mxperf-machine", "ci-runner-a")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*mxperf verdicts: 2 new*",
            "*mxperf: no baselines for hardware ci-runner-a; stored for: cpu-* (see --mxperf-machine)*",
        ]
    )
    strict = suite.runpytest("--mxperf", "--mxperf-machine", "ci-runner-a", "--mxperf-strict")
    strict.stdout.fnmatch_lines(
        ["*no baseline for hardware ci-runner-a (stored for: cpu-*; see --mxperf-machine)*"]
    )


def test_machine_override_from_env(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_MXPERF_MACHINE", "fleet-x")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    assert [p.parent.name for p in stored(suite)] == ["fleet-x"]


def test_corrupt_baseline_is_named_and_never_overwritten(suite: pytest.Pytester) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    path = stored(suite)[0]
    path.write_text('{"schema": 1, "cases": {')
    result = suite.runpytest("--mxperf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*mxperf: error: baseline file {path} is not valid JSON*"])
    update = suite.runpytest("--mxperf", "--mxperf-update")
    assert update.ret == pytest.ExitCode.TESTS_FAILED
    update.stdout.fnmatch_lines([f"*baseline not written: baseline file {path} is not valid JSON*"])
    assert path.read_text() == '{"schema": 1, "cases": {'
    strict = suite.runpytest("--mxperf", "--mxperf-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED


def test_future_schema_is_refused_by_name(suite: pytest.Pytester) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    path = stored(suite)[0]
    data = json.loads(path.read_text())
    data["schema"] = 7
    path.write_text(json.dumps(data))
    result = suite.runpytest("--mxperf")
    result.stdout.fnmatch_lines([f"*baseline file {path} uses schema 7, newer than this*"])
    result.stdout.fnmatch_lines(["*mxperf verdicts: 2 new*"])


def test_ci_variables_name_the_commit(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = git(suite.path, "rev-parse", "HEAD")
    monkeypatch.setenv("GITHUB_SHA", sha)
    monkeypatch.setenv("GITHUB_REF_NAME", "ci-branch")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    data = json.loads(stored(suite)[0].read_text())
    assert data["commit"]["source"] == "env:GITHUB_SHA" and data["commit"]["branch"] == "ci-branch"


# console script ------------------------------------------------------------------------------
def test_console_script_list_show_compare(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    path = suite.path
    _make_baseline(suite, alpha=400, beta=200)
    first = git(path, "rev-parse", "HEAD~1")
    _make_baseline(suite, alpha=200, beta=210)
    second = git(path, "rev-parse", "HEAD~1")
    root = str(path / "baselines")
    os.chdir(path)
    capsys.readouterr()
    assert cli.main(["--dir", root, "list"]) == 0
    out = capsys.readouterr().out
    assert first[:10] in out and second[:10] in out and "cpu-" in out
    # Both runs were stored here: one anonymous machine id for the key.
    (summary,) = [line for line in out.splitlines() if "(all)" in line]
    assert summary.split()[2:] == ["1", "1", "machine(s)"]
    assert cli.main(["--dir", root, "show", first[:10]]) == 0
    out = capsys.readouterr().out
    assert "alpha/inference/float32/bs8/cpu" in out and "400.0" in out
    assert cli.main(["--dir", root, "compare", first[:10], second[:10]]) == 1
    out = capsys.readouterr().out
    assert "-50.0%" in out and "regressed" in out and "1 case(s) regressed" in out
    assert cli.main(["--dir", root, "compare", second[:10], first[:10]]) == 0
    assert "improved" in capsys.readouterr().out
    assert cli.main(["--dir", root, "compare", first[:10], second[:10], "--price-per-hour", "3.6"])
    # 3.6 $/h: $2.50 per million images at 400 img/s, $5.00 at 200 img/s.
    assert "$2.50 -> $5.00 (+100.0%)" in capsys.readouterr().out
    assert cli.main(["--dir", root, "show", "0000000"]) == 2
    assert "no baseline for revision '0000000'" in capsys.readouterr().err
    assert cli.main(["--dir", str(path / "nowhere"), "list"]) == 2


def test_console_script_is_installed() -> None:
    import shutil
    import subprocess
    import sys

    exe = shutil.which("mxperf") or str(Path(sys.executable).with_name("mxperf"))
    done = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "compare" in done.stdout


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


def test_ctrl_c_during_update_stores_nothing(suite: pytest.Pytester) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    (before,) = stored(suite)
    text = before.read_text()
    write_speeds(suite, alpha=1, beta=1)
    suite.makepyfile(test_zz_interrupt="def test_stop():\n    raise KeyboardInterrupt\n")
    # A subprocess: an in-process run would pass the interrupt on to this session.
    result = suite.runpytest_subprocess("--mxperf", "--mxperf-update", "--mxperf-allow-dirty")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*run interrupted: baselines not updated*"])
    assert stored(suite) == [before] and before.read_text() == text


# bad inputs (issue #10) ----------------------------------------------------------------------
def test_unknown_compare_revision_is_a_usage_error(suite: pytest.Pytester) -> None:
    _make_baseline(suite, alpha=400, beta=200)
    result = suite.runpytest("--mxperf", "--mxperf-compare", "nonexistent-rev")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mxperf-compare 'nonexistent-rev': unknown revision*"])


def test_compare_with_a_commit_without_baseline_lists_those_with_one(
    suite: pytest.Pytester,
) -> None:
    _make_baseline(suite, alpha=400, beta=200)
    stored_sha = stored(suite)[0].stem
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

    _make_baseline(suite, alpha=400, beta=200)
    stored_sha = stored(suite)[0].stem
    shutil.rmtree(suite.path / ".git")
    result = suite.runpytest("--mxperf", "--mxperf-compare", "deadbeef")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'deadbeef': unknown revision (not a commit here (no git*"])
    ok = suite.runpytest("--mxperf", "--mxperf-compare", stored_sha[:8])
    ok.assert_outcomes(passed=2)
    ok.stdout.fnmatch_lines(["*mxperf verdicts: 2 pass*"])


def test_compare_with_an_unreadable_baseline_is_a_usage_error(suite: pytest.Pytester) -> None:
    # The revision asked for has a file, but it cannot be read: nothing would be compared.
    _make_baseline(suite, alpha=400, beta=200)
    (path,) = stored(suite)
    _spoil(path, "rel_iqr", "low")
    result = suite.runpytest("--mxperf", "--mxperf-compare", path.stem[:10])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*--mxperf-compare '{path.stem[:10]}': its baseline cannot be used: baseline file "
            f"{path}: case *'rel_iqr' must be a finite number, got 'low'"
        ]
    )
    assert "mxperf: throughput" not in result.stdout.str()  # nothing was measured


@pytest.mark.parametrize(
    ("option", "where"),
    [("--mxperf-baseline-dir", "a-file/baselines"), ("--mxperf-json", "a-file/report.json")],
)
def test_unwritable_output_is_a_usage_error_before_measuring(
    suite: pytest.Pytester, option: str, where: str
) -> None:
    (suite.path / "a-file").write_text("a regular file\n")
    result = suite.runpytest("--mxperf", "--mxperf-update", option, where)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{where} (*a-file is not a directory)*"])
    assert option in result.stderr.str()
    assert "mxperf: throughput" not in result.stdout.str()  # nothing was measured


BLOCKER = """
import pathlib

def test_zz_block_outputs():
    # Outputs that were writable at the start become unwritable before the end of the run.
    for name in ("out", "bl"):
        pathlib.Path(name).write_text("now a regular file\\n")
"""


def test_write_failure_at_the_end_keeps_the_results(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_zz_blocker=BLOCKER)
    git(suite.path, "add", "-A")
    git(suite.path, "commit", "-qm", "blocker")
    result = suite.runpytest(
        "--mxperf", "--mxperf-update", "--mxperf-baseline-dir", "bl", "--mxperf-json", "out/r.json"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3)
    text = result.stdout.str()
    assert "Traceback" not in text and "Error:" not in text.replace("error(s)", "")
    result.stdout.fnmatch_lines(
        [
            "*baseline not written: cannot write *bl*: *",
            "*cannot write the JSON report to out/r.json: *; measured results saved to *.json",
        ]
    )
    saved = Path(text.split("measured results saved to ")[1].split()[0])
    try:
        cases = json.loads(saved.read_text())["cases"]
        assert sorted(c["model"] for c in cases) == ["alpha", "beta"]
    finally:
        saved.unlink()


def _spoil(path: Path, field: str, value: object) -> str:
    """Give the first case of a stored file a wrongly typed field; return the new text."""
    data = json.loads(path.read_text())
    first = sorted(data["cases"])[0]
    data["cases"][first][field] = value
    text = json.dumps(data)
    path.write_text(text)
    return text


def test_update_never_rewrites_a_file_with_bad_values(suite: pytest.Pytester) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    path = stored(suite)[0]
    text = _spoil(path, "images_per_sec", "fast")
    update = suite.runpytest("--mxperf", "--mxperf-update")
    assert update.ret == pytest.ExitCode.TESTS_FAILED
    update.stdout.fnmatch_lines(
        [f"*baseline not written: baseline file {path}: case *'images_per_sec' must be a finite*"]
    )
    assert path.read_text() == text


def test_console_script_bad_values_exit_2_naming_the_file(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    _make_baseline(suite, alpha=400, beta=200)
    (path,) = stored(suite)
    _spoil(path, "runs", ["many"])
    root = str(suite.path / "baselines")
    capsys.readouterr()
    for argv in (["show"], ["show", path.stem[:8]], ["compare", path.stem, path.stem]):
        assert cli.main(["--dir", root, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert f"baseline file {path}: case " in err and "'runs'" in err


def test_console_script_skips_an_unreadable_file_unless_asked_for_it(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    _make_baseline(suite, alpha=400, beta=200)
    first = git(suite.path, "rev-parse", "HEAD~1")
    _make_baseline(suite, alpha=200, beta=210)
    second = git(suite.path, "rev-parse", "HEAD~1")
    hw = stored(suite)[0].parent
    bad = hw / ("ab" * 20 + ".json")
    bad.write_text('{"schema": 1, "cases": {')  # truncated
    root = str(suite.path / "baselines")
    capsys.readouterr()
    assert cli.main(["--dir", root, "show", first[:10]]) == 0
    out, err = capsys.readouterr()
    assert "400.0" in out and f"mxperf: warning: skipped: baseline file {bad} is not valid" in err
    assert cli.main(["--dir", root, "show"]) == 0
    assert f"skipped: baseline file {bad}" in capsys.readouterr().err
    assert cli.main(["--dir", root, "compare", first[:10], second[:10]]) == 1  # regressed
    out, err = capsys.readouterr()
    assert "regressed" in out and f"skipped: baseline file {bad}" in err
    assert cli.main(["--dir", root, "show", "abab"]) == 2
    assert f"mxperf: error: baseline file {bad} is not valid JSON" in capsys.readouterr().err
    assert cli.main(["--dir", root, "compare", first[:10], "abab"]) == 2


def test_console_script_options_after_the_subcommand(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    _make_baseline(suite, alpha=400, beta=200)
    first = git(suite.path, "rev-parse", "HEAD~1")
    (hw,) = {p.parent.name for p in stored(suite)}
    root = str(suite.path / "baselines")
    capsys.readouterr()
    assert cli.main(["show", first[:10], "--hardware", hw, "--dir", root]) == 0
    assert "400.0" in capsys.readouterr().out
    assert cli.main(["compare", first[:10], first[:10], "--dir", root, "--hardware", hw]) == 0
    assert cli.main(["list", "--dir", root]) == 0
    page = suite.path / "page.html"
    if importlib.util.find_spec("plotly") is not None:  # the [report] extra
        assert cli.main(["report", "--dir", root, "--hardware", hw, "--out", str(page)]) == 0
        assert page.is_file() and "1 hardware key(s)" in capsys.readouterr().out
        assert cli.main(["report", "--dir", root, "--hardware", "nope", "--out", str(page)]) == 2
        assert "no baselines for hardware 'nope'" in capsys.readouterr().err
    assert cli.main(["--dir", root, "show", "--hardware", "nope"]) == 2
    assert "no baselines for hardware 'nope'" in capsys.readouterr().err


def test_stored_environment_holds_no_paths(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = str(Path.home() / ".mxnet")
    monkeypatch.setenv("MXNET_HOME", home)
    monkeypatch.setenv("MXNET_CPU_WORKER_NTHREADS", "2")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    text = stored(suite)[0].read_text()
    assert home not in text and str(Path.home()) not in text
    case = json.loads(text)["cases"]["alpha/inference/float32/bs8/cpu"]
    assert case["environment"]["MXNET_HOME"] == "<path>"
    assert case["environment"]["MXNET_CPU_WORKER_NTHREADS"] == "2"


def test_clean_update_after_a_dirty_one_keeps_only_clean_runs(suite: pytest.Pytester) -> None:
    write_speeds(suite, alpha=900, beta=900)  # uncommitted: the tree is dirty
    dirty = suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-allow-dirty")
    dirty.assert_outcomes(passed=2)
    git(suite.path, "checkout", "--", "speed.txt")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    data = json.loads(stored(suite)[0].read_text())
    case = data["cases"]["alpha/inference/float32/bs8/cpu"]
    assert data["commit"]["dirty"] is False and case["dirty"] is False
    assert case["runs"] == [pytest.approx(400.0)]
    assert case["images_per_sec"] == pytest.approx(400.0)


@pytest.mark.parametrize("quiet", ["-q", "-qq"])
def test_corrupt_file_error_survives_quiet_runs(suite: pytest.Pytester, quiet: str) -> None:
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    path = stored(suite)[0]
    path.write_text('{"schema": 1, "cases": {')
    result = suite.runpytest("--mxperf", quiet, "--mxperf-json", "report.json")
    assert result.ret == pytest.ExitCode.OK  # not --mxperf-strict: the run goes on without it
    assert "mxperf: hardware" not in result.stdout.str()  # the header is hidden
    result.stdout.fnmatch_lines([f"mxperf: error: baseline file {path} is not valid JSON*"])
    data = json.loads((suite.path / "report.json").read_text())
    assert len(data["baseline_errors"]) == 1 and str(path) in data["baseline_errors"][0]
