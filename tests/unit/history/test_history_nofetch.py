"""Reading the history without asking the remote (``--no-fetch``): a job step that has no
credentials (the checkout keeps none) reads the branch as the checkout fetched it; only the
step that adds entries fetches and pushes."""

from __future__ import annotations

from pathlib import Path

import pytest
from history_data import entry

from pytest_mxperf.cli import main
from pytest_mxperf.history import entrystore
from pytest_mxperf.testing.repos import commits, git


def _job_clone(tmp_path: Path) -> tuple[Path, list[str]]:
    """origin with main's three commits and entries for the first two; a job's fresh clone of
    it (the branch fetched with it, as actions/checkout with fetch-depth: 0 fetches it)."""
    source = tmp_path / "source"
    source.mkdir()
    git(source, "init", "-q", "-b", "main")
    shas = commits(source, [f"commit {n}" for n in range(3)])
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(origin))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(origin), str(seed))
    entrystore.open_store(None, seed).add([entry(shas[1], shas[0], run="job-1")])
    job = tmp_path / "job"
    git(tmp_path, "clone", "-q", str(origin), str(job))
    return job, shas


def test_a_read_without_fetch_takes_the_checkouts_copy(tmp_path: Path) -> None:
    job, shas = _job_clone(tmp_path)
    real = git(job, "remote", "get-url", "origin")
    git(job, "remote", "set-url", "origin", str(tmp_path / "no-credentials"))  # unreachable
    with pytest.raises(entrystore.StoreError, match="cannot fetch mxperf-history"):
        entrystore.open_store(None, job).read()
    local = entrystore.open_store(None, job, fetch=False)
    assert [e.commit for e in local.read()] == [shas[1]]
    # The add step (with credentials) still fetches and pushes on top of the remote's branch.
    git(job, "remote", "set-url", "origin", real)
    assert local.add([entry(shas[2], shas[1], run="job-2")]) == 1
    origin = entrystore.GitStore(tmp_path / "origin.git")
    assert sorted(e.run for e in origin.read()) == ["job-1", "job-2"]


def test_history_verbs_and_the_page_read_without_fetch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job, shas = _job_clone(tmp_path)
    git(job, "remote", "set-url", "origin", str(tmp_path / "no-credentials"))
    monkeypatch.chdir(job)
    assert main(["history", "base", "--no-fetch"]) == 0
    assert capsys.readouterr().out.strip() == shas[1]  # the last commit with an entry
    assert main(["history", "anchor", "--no-fetch", "--every", "1"]) == 0
    assert capsys.readouterr().out.strip() == shas[0]  # the history's first commit
    assert main(["history", "show", "--no-fetch"]) == 0
    assert shas[1][:10] in capsys.readouterr().out
    assert main(["history", "base"]) == 2  # fetching without credentials: named, exit 2
    assert "cannot fetch mxperf-history" in capsys.readouterr().err
    pytest.importorskip("plotly")
    out = tmp_path / "page.html"
    args = ["--dir", str(tmp_path / "none"), "report", "--out", str(out)]
    assert main([*args, "--history", "git:mxperf-history", "--history-no-fetch"]) == 0
    assert "Index of paired ratios" in out.read_text()
