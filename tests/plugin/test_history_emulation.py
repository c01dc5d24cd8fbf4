"""scripts/history_emulation.py at a tiny scale on the fake back end: two jobs on fresh clones,
one anchored, the steps named at their commits and the anchors' narrower interval printed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pytest_mxperf.testing.repos import git

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "history_emulation.py"


def _emulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *more: str) -> str:
    """Two commits on the fake back end (``more``: further arguments): its output, after
    checking that the steps are marked at their commits (alpha 1, beta 2) and nowhere else."""
    spec = importlib.util.spec_from_file_location("history_emulation", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = ["--fake", "--commits", "2", "--every", "2", "--slow-at", "1", "--fast-at", "2"]
    assert module.main([*argv, *more, "--keep", str(tmp_path / "emulation")]) == 0
    out = capsys.readouterr().out
    alpha, beta, gamma = out.split("/inference/float32/bs8/cpu: index at each commit")[1:4]
    assert "marked steps: commits [1]" in alpha
    assert "marked steps: commits [2]" in beta
    assert "marked steps: commits none" in gamma
    return str(out)


def test_the_emulation_finds_both_steps_at_their_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _emulate(tmp_path, capsys)
    assert "a step is marked when it is at least 2.5% either way and its 99% interval" in out
    assert "commit 2: job" in out and "(anchored)" in out
    assert "anchored jobs (1): " in out and "other jobs (1): " in out and "all jobs (2): " in out
    assert "95% interval at commit 2 with anchors" in out and "chain only" in out
    # The jobs pushed their entries to origin; their clones are gone.
    assert not list((tmp_path / "emulation").glob("job-*"))


def test_with_pull_requests_the_main_jobs_adopt_their_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _emulate(tmp_path, capsys, "--prs")
    assert "commit 1: job" in out and "adopted" in out
    assert "jobs that adopted the PR's pair (2): " in out
    assert "PR jobs (2, each paid to gate its merge): " in out
    # Every entry on the branch names a commit of main; the adopted ones the sha they measured.
    origin = tmp_path / "emulation" / "origin.git"
    line = set(git(origin, "rev-list", "main").split())
    stored = [
        json.loads(x) for x in git(origin, "show", "mxperf-history:history.jsonl").splitlines()
    ]
    assert {e["commit"] for e in stored} <= line
    adopted = [e for e in stored if e.get("measured")]
    assert adopted and all(e["measured"] not in line for e in adopted)
    assert not list((tmp_path / "emulation").glob("pr-*"))
