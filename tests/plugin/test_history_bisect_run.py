"""``mxperf bisect`` end to end: a scratch repository of 8 commits whose fake speeds come from
``speed.txt``, one commit 8% slower; paired runs name it."""

from __future__ import annotations

import json
from typing import Callable

import pytest

from pytest_mxperf.cli import main
from pytest_mxperf.testing.repos import SPEEDS_SUITE, git, write_speeds


def test_bisect_names_the_slower_commit_in_at_most_four_paired_runs(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    fake_pytester.makepyfile(test_suite=SPEEDS_SUITE)
    shas = []
    for i in range(8):
        write_speeds(fake_pytester.path, alpha=400 if i < 5 else 368, beta=200)
        (fake_pytester.path / "notes.txt").write_text(f"commit {i}\n")
        shas.append(commit(f"commit {i}" + (": alpha 8% slower" if i == 5 else "")))
    monkeypatch.chdir(fake_pytester.path)
    before = git(fake_pytester.path, "status", "--porcelain")
    hist = tmp_path_factory.mktemp("hist")
    # Each step's pair only measures (no second run of a regression, no profile round: two
    # processes and two fork servers fewer a slower step), as a history's pairs do.
    only_ratio = ["--", "--mxperf-pair-confirm", "off", "--mxperf-pair-profile", "off"]
    code = main(["bisect", "-k", "alpha", "--store", str(hist), shas[0], shas[7], *only_ratio])
    out = capsys.readouterr().out
    assert code == 0, out
    runs = int(out.split("mxperf bisect: ")[2].split(" paired run")[0])
    assert runs <= 4
    assert f"first commit that moved: {shas[5][:7]} commit 5: alpha 8% slower" in out
    assert (
        f"{shas[5][:7]} commit 5: alpha 8% slower: moved: alpha/inference/float32/bs8/cpu: HEAD vs"
        in out
    )
    # Each step's pair went into the history: candidate vs GOOD.
    stored = [json.loads(x) for x in (hist / "history.jsonl").read_text().splitlines()]
    assert len(stored) == runs and {e["base"] for e in stored} == {shas[0]}
    assert git(fake_pytester.path, "status", "--porcelain") == before
    assert len(git(fake_pytester.path, "worktree", "list").splitlines()) == 1
