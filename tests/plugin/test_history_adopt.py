"""``mxperf history adopt``: a pull request's own paired run (measured on its test merge commit)
becomes the entries of the commit it is merged as, on the fake back end in a scratch
repository; when the merged commit's code is not what the pair measured, it is refused and the
job pairs as usual."""

from __future__ import annotations

import json
from typing import Callable

import pytest

from pytest_mxperf.cli import main
from pytest_mxperf.testing.repos import SPEEDS_SUITE, git, write_speeds


def test_a_pull_requests_pair_is_adopted_by_the_commit_it_is_merged_as(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = fake_pytester.path
    (path / ".gitignore").write_text("__pycache__/\n*.json\n")
    fake_pytester.makepyfile(test_suite=SPEEDS_SUITE)
    write_speeds(path, alpha=400, beta=200)
    first = commit("suite")
    write_speeds(path, alpha=400, beta=201)
    second = commit("notes")
    monkeypatch.chdir(path)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-ab", first, "--mxperf-json", "m.json")
    result.assert_outcomes(passed=2)
    assert main(["history", "add", "m.json"]) == 0
    # The pull request: a branch off main; its job measures GitHub's test merge commit (the PR
    # merged into its base), paired with the base.
    git(path, "checkout", "-q", "-b", "pr")
    write_speeds(path, alpha=360, beta=201)
    commit("alpha 10% slower")
    git(path, "checkout", "-q", "--detach", second)
    git(path, "merge", "-q", "--no-ff", "-m", "Merge pr into main", "pr")
    test_merge = git(path, "rev-parse", "HEAD")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-ab", second, "--mxperf-json", "pr.json")
    result.assert_outcomes(passed=1, failed=1)
    recorded = json.loads((path / "pr.json").read_text())["run"]["commit"]
    assert recorded["tree"] == git(path, "rev-parse", "HEAD^{tree}")
    assert recorded["dirty"] is False
    # Squash-merged: a new commit, the test merge commit's tree.
    git(path, "checkout", "-q", "main")
    git(path, "merge", "-q", "--squash", "pr")
    merged = commit("alpha 10% slower (#1)")
    assert merged != test_merge
    capsys.readouterr()
    assert main(["history", "adopt", "pr.json", "--check"]) == 1  # adoptable; alpha regressed
    out = capsys.readouterr().out
    assert f"adoptable: 2 entries: the pair of {test_merge[:10]} with {second[:10]}" in out
    assert "judged regressed: alpha" in out
    stored = git(path, "show", "mxperf-history:history.jsonl").splitlines()
    assert len(stored) == 2  # --check stored nothing
    assert main(["history", "adopt", "pr.json"]) == 1
    assert "2 new in branch mxperf-history" in capsys.readouterr().out
    assert main(["history", "adopt", "pr.json"]) == 1  # the same pair again: merged
    assert "0 new in" in capsys.readouterr().out
    entries = [
        json.loads(x) for x in git(path, "show", "mxperf-history:history.jsonl").splitlines()
    ]
    adopted = [e for e in entries if e["commit"] == merged]
    assert len(adopted) == 2 and len(entries) == 4
    alpha = next(e for e in adopted if e["case"].startswith("alpha"))
    assert (alpha["base"], alpha["measured"]) == (second, test_merge)
    assert alpha["ratio"] == pytest.approx(0.9) and alpha["status"] == "regressed"
    assert alpha["subject"] == "alpha 10% slower (#1)"
    assert all("measured" not in e for e in entries if e["commit"] == second)
    # The index has a step there, and the next job pairs with the merged commit.
    assert main(["history", "show"]) == 0
    assert "step -10.0%" in capsys.readouterr().out
    write_speeds(path, alpha=360, beta=150)
    commit("beta slower")
    assert main(["history", "base"]) == 0
    assert capsys.readouterr().out.strip() == merged
    # A commit whose code the pair did not measure (main moved on): refused, nothing stored.
    assert main(["history", "adopt", "pr.json"]) == 3
    out = capsys.readouterr().out
    assert "not adopted" in out and "the code differs" in out
    assert len(git(path, "show", "mxperf-history:history.jsonl").splitlines()) == 4
