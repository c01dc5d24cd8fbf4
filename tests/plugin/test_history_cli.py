"""``mxperf history``: a paired run's JSON report into the history branch, and the commits the
next job pairs with (``base``, ``anchor``), on the fake back end in a scratch repository."""

from __future__ import annotations

import json
from typing import Callable

import pytest

import pytest_mxperf
from pytest_mxperf.cli import main
from pytest_mxperf.testing.repos import SPEEDS_SUITE, git, write_speeds


def test_a_paired_report_becomes_entries_on_the_branch_and_the_next_base(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_pytester.makepyfile(test_suite=SPEEDS_SUITE)
    write_speeds(fake_pytester.path, alpha=400, beta=200)
    first = commit("suite")
    write_speeds(fake_pytester.path, alpha=360, beta=200)
    second = commit("alpha 10% slower")
    monkeypatch.chdir(fake_pytester.path)
    # The first job: no entry yet, so HEAD pairs with its parent.
    assert main(["history", "base"]) == 0
    assert capsys.readouterr().out.strip() == first
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", first, "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=1, failed=1)
    capsys.readouterr()
    assert main(["history", "add", "report.json"]) == 0
    assert "2 new of 2 entries in branch mxperf-history" in capsys.readouterr().out
    assert main(["history", "add", "report.json"]) == 0  # the same report again: merged
    assert "0 new of 2 entries" in capsys.readouterr().out
    stored = [
        json.loads(x)
        for x in git(fake_pytester.path, "show", "mxperf-history:history.jsonl").splitlines()
    ]
    alpha = next(e for e in stored if e["case"].startswith("alpha"))
    assert (alpha["commit"], alpha["base"]) == (second, first)
    assert alpha["ratio"] == pytest.approx(0.9) and alpha["level"] == 0.99
    assert alpha["subject"] == "alpha 10% slower" and alpha["software"]["mxnet"] == "fake-1.9.1"
    assert alpha["plugin_version"] == pytest_mxperf.__version__
    assert git(fake_pytester.path, "status", "--porcelain") == ""  # report.json is ignored
    # The next commit pairs with the last one that has an entry, skipping one that has none.
    commit("no job ran here")
    commit("the next job")
    assert main(["history", "base"]) == 0
    assert capsys.readouterr().out.strip() == second
    # Two commits on the line have entries: every second commit is due an anchor, the first.
    assert main(["history", "anchor", "--every", "2"]) == 0
    assert capsys.readouterr().out.strip() == first
    assert main(["history", "anchor", "--every", "3"]) == 0
    assert capsys.readouterr().out.strip() == ""
    assert main(["history", "show"]) == 0
    shown = capsys.readouterr().out
    assert "alpha/inference/float32/bs8/cpu: index (1.0 at" in shown
    assert "0.9000" in shown and "CHANGED" in shown


def test_history_add_of_a_plain_run_says_why_not(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_pytester.makepyfile(test_suite=SPEEDS_SUITE)
    write_speeds(fake_pytester.path, alpha=400)
    commit("suite")
    fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    monkeypatch.chdir(fake_pytester.path)
    assert main(["history", "add", "report.json", "--store", "hist"]) == 2
    assert (
        "report.json is not from a paired run (run with --mxperf-ab REV)" in capsys.readouterr().err
    )
    assert not (fake_pytester.path / "hist").exists()


def test_a_paired_run_with_mxperf_history_adds_its_own_entries(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    fake_pytester.makepyfile(test_suite=SPEEDS_SUITE)
    write_speeds(fake_pytester.path, alpha=400, beta=200)
    first = commit("suite")
    write_speeds(fake_pytester.path, alpha=400, beta=220)
    commit("beta 10% faster")
    hist = tmp_path_factory.mktemp("hist")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-ab", first, f"--mxperf-history={hist}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"mxperf: 2 new of 2 history entries in directory {hist}"])
    stored = {
        e["case"]: e for e in map(json.loads, (hist / "history.jsonl").read_text().splitlines())
    }
    assert stored["beta/inference/float32/bs8/cpu"]["ratio"] == pytest.approx(1.1)
    assert stored["beta/inference/float32/bs8/cpu"]["subject"] == "beta 10% faster"
    # Without a pair there is no ratio to keep: refused before anything is measured.
    result = fake_pytester.runpytest("--mxperf", f"--mxperf-history={hist}")
    result.stderr.fnmatch_lines(["*--mxperf-history keeps paired ratios: give the revision*"])
    assert len((hist / "history.jsonl").read_text().splitlines()) == 2
