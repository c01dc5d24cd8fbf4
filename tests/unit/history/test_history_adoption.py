"""When a pull request's pair is adopted as the entries of the commit it was merged as, and each
reason it is refused (said by name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from history_data import entry, paired_report

from pytest_mxperf.history import adoption
from pytest_mxperf.history.entries import EntryError
from pytest_mxperf.testing.repos import git

CASES = {"alpha/inference/float32/bs8/cpu": 0.92, "beta/inference/float32/bs8/cpu": 1.0}


def _repo(path: Path) -> dict[str, str]:
    """main: c0 -> c1 (with an entry); a PR branch off c1; its test merge commit; the PR
    squash-merged onto main as ``merged``."""
    git(path, "init", "-q", "-b", "main")
    shas = {}
    for name in ("c0", "c1"):
        (path / "notes.txt").write_text(name)
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", name)
        shas[name] = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "-b", "pr")
    (path / "model.py").write_text("slower = True\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "pr")
    git(path, "checkout", "-q", "--detach", shas["c1"])
    git(path, "merge", "-q", "--no-ff", "-m", "test merge", "pr")
    shas["test_merge"] = git(path, "rev-parse", "HEAD")
    shas["tree"] = git(path, "rev-parse", "HEAD^{tree}")
    git(path, "checkout", "-q", "main")
    git(path, "merge", "-q", "--squash", "pr")
    git(path, "commit", "-q", "-m", "pr (#1)")
    shas["merged"] = git(path, "rev-parse", "HEAD")
    return shas


def _report(shas: dict[str, str], base: str | None = None, **commit: Any) -> dict[str, Any]:
    report = paired_report(shas["test_merge"], base or shas["c1"], CASES)
    report["run"]["commit"].update({"dirty": False, "tree": shas["tree"], **commit})
    return report


def test_the_pair_becomes_the_merged_commits_entries(tmp_path: Path) -> None:
    shas = _repo(tmp_path)
    stored = [entry(shas["c1"], shas["c0"])]
    got = adoption.adopt(_report(shas), "pr.json", tmp_path, stored)
    assert {e.commit for e in got.entries} == {shas["merged"]}
    assert {e.measured for e in got.entries} == {shas["test_merge"]}
    assert {e.base for e in got.entries} == {shas["c1"]}
    assert sorted(e.ratio for e in got.entries) == pytest.approx([0.92, 1.0])
    assert got.regressed == ["alpha/inference/float32/bs8/cpu"]
    stamp = git(tmp_path, "log", "-1", "--format=%cI", shas["merged"])
    assert got.entries[0].date[:19] == stamp[:19]  # the merged commit's date, not the PR's
    # Its own report (a main job's pair, measured at the commit itself) names no other sha.
    own = paired_report(shas["merged"], shas["c1"], CASES)
    own["run"]["commit"].update({"dirty": False, "tree": shas["tree"]})
    assert {e.measured for e in adoption.adopt(own, "m.json", tmp_path, stored).entries} == {""}


@pytest.mark.parametrize(
    ("commit", "said"),
    [
        ({"dirty": True}, "a working tree with uncommitted changes"),
        ({"dirty": None}, "a tree of unknown state"),
        ({"tree": None}, "records no tree"),
        ({"tree": "0" * 40}, "the code differs"),
    ],
)
def test_a_pair_of_other_code_is_refused_by_name(
    tmp_path: Path, commit: dict[str, Any], said: str
) -> None:
    shas = _repo(tmp_path)
    stored = [entry(shas["c1"], shas["c0"])]
    with pytest.raises(adoption.NotAdopted, match=said):
        adoption.adopt(_report(shas, **commit), "pr.json", tmp_path, stored)


def test_a_pair_with_another_base_than_the_chains_is_refused(tmp_path: Path) -> None:
    shas = _repo(tmp_path)
    stored = [entry(shas["c1"], shas["c0"])]
    with pytest.raises(adoption.NotAdopted, match=f"pairs with {shas['c1'][:10]}"):
        adoption.adopt(_report(shas, base=shas["c0"]), "pr.json", tmp_path, stored)
    # With no entry yet the chain's base is HEAD's parent: c1 again.
    assert adoption.adopt(_report(shas), "pr.json", tmp_path, []).base == shas["c1"]


def test_a_report_with_no_ratio_or_of_another_kind(tmp_path: Path) -> None:
    shas = _repo(tmp_path)
    empty = _report(shas)
    empty["cases"] = []
    with pytest.raises(adoption.NotAdopted, match="no case of this paired run measured"):
        adoption.adopt(empty, "pr.json", tmp_path, [])
    plain = _report(shas)
    del plain["paired"], plain["settings"]["ab"]
    with pytest.raises(EntryError, match="not from a paired run"):
        adoption.adopt(plain, "pr.json", tmp_path, [])
