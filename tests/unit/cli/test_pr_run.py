"""``mxperf history pr-run`` against a fake GitHub API on 127.0.0.1: the run whose pair a
main-branch job may adopt, and each case where there is none (said why, exit 0)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mxperf.cli import main
from pytest_mxperf.testing.fakegithub import FakeGitHub

REPO = "octo/proj"  # the repository of the `api` fixture (conftest.py)
MERGED, HEAD = "a" * 40, "b" * 40


def _pull(source: str = REPO) -> dict[str, Any]:
    return {
        "number": 7,
        "merged_at": "2026-11-29T10:00:00Z",
        "merge_commit_sha": MERGED,
        "head": {"sha": HEAD, "repo": {"full_name": source}},
        "base": {"repo": {"full_name": REPO}},
    }


def _run(run_id: int, conclusion: str = "success", **more: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "path": ".github/workflows/mxperf-pr.yml",
        "event": "pull_request",
        "status": "completed",
        "conclusion": conclusion,
        "head_sha": HEAD,
        "head_repository": {"full_name": REPO},
        **more,
    }


@pytest.fixture(autouse=True)
def _pushed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_SHA", MERGED)  # the push's commit, as GitHub sets it


def _pr_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    assert main(["history", "pr-run", *args]) == 0
    got = capsys.readouterr()
    return got.out.strip(), got.err


def test_the_last_reported_run_of_the_merged_prs_head(
    api: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    api.merged[MERGED] = _pull()
    api.runs += [
        _run(11),
        _run(12, "failure"),  # a regression: its report exists, and it is the newest
        _run(13, path=".github/workflows/other.yml"),
        _run(14, head_sha="c" * 40),
    ]
    out, _ = _pr_run(capsys)
    assert out == "12"
    paths = [c.path for c in api.calls]
    assert paths[0] == f"/repos/{REPO}/commits/{MERGED}/pulls"
    assert paths[1] == f"/repos/{REPO}/actions/workflows/mxperf-pr.yml/runs"
    assert {c.token for c in api.calls} == {"t0k"}


@pytest.mark.parametrize(
    ("pull", "runs", "said"),
    [
        (None, [], "no pull request was merged as aaaaaaaaaa (a direct push)"),
        ("someone/proj", [_run(11)], "#7 came from someone/proj, not octo/proj"),
        ("", [_run(11)], "#7 came from a deleted repository"),
        (REPO, [], "no completed run of mxperf-pr.yml on #7's head bbbbbbbbbb"),
        (REPO, [_run(11), _run(12, "cancelled")], "ended 'cancelled'"),
        (REPO, [_run(11, head_repository={"full_name": "someone/proj"})], "no completed run"),
    ],
)
def test_no_run_to_adopt_is_said(
    api: FakeGitHub,
    capsys: pytest.CaptureFixture[str],
    pull: str | None,
    runs: list[dict[str, Any]],
    said: str,
) -> None:
    if pull is not None:
        api.merged[MERGED] = _pull(pull)
    api.runs += runs
    out, err = _pr_run(capsys)
    assert out == "" and said in err


def test_an_api_failure_is_a_warning_and_the_job_pairs_itself(
    api: FakeGitHub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    api.fail_with = 502
    out, err = _pr_run(capsys, "--sha", MERGED)
    assert out == "" and "warning" in err and "HTTP 502" in err and "pairs itself" in err
    monkeypatch.delenv("GITHUB_TOKEN")
    assert main(["history", "pr-run"]) == 2
    assert "with actions: read, pull-requests: read" in capsys.readouterr().err
    monkeypatch.setenv("GITHUB_TOKEN", "t0k")
    monkeypatch.delenv("GITHUB_SHA")
    assert main(["history", "pr-run"]) == 2
    assert "no commit: pass --sha or set GITHUB_SHA" in capsys.readouterr().err
