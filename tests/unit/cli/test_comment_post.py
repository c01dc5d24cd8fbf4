"""``mxperf comment post`` against a fake GitHub API on 127.0.0.1: one sticky comment, found
again by its marker over pages, never posted twice; failures of the API never fail the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mxperf import cli
from pytest_mxperf.cli import github
from pytest_mxperf.reporting.pr_comment import MARKER
from pytest_mxperf.testing.fakegithub import FakeGitHub

REPO = "octo/proj"  # the repository of the `api` fixture (conftest.py)


@pytest.fixture
def body(tmp_path: Path) -> Path:
    path = tmp_path / "comment.md"
    path.write_text(f"{MARKER}\n\n:white_check_mark: **mxperf: pass**\n")
    return path


def post(body: Path, pr: str = "7") -> int:
    return cli.main(["comment", "post", "--body", str(body), "--pr", pr])


def test_created_once_then_updated(api: FakeGitHub, body: Path) -> None:
    api.add_comment(7, "LGTM")
    assert post(body) == 0
    assert [(c.method, c.path) for c in api.calls] == [
        ("GET", f"/repos/{REPO}/issues/7/comments"),
        ("POST", f"/repos/{REPO}/issues/7/comments"),
    ]
    assert all(c.token == "t0k" for c in api.calls)
    body.write_text(f"{MARKER}\n\n:x: **mxperf: regressed**\n")
    assert post(body) == 0
    assert [c.method for c in api.calls] == ["GET", "POST", "GET", "PATCH"]
    ours = [c for c in api.comments[7] if c["body"].startswith(MARKER)]
    assert len(ours) == 1 and "regressed" in ours[0]["body"]
    assert post(body) == 0  # the same body again: nothing to send
    assert [c.method for c in api.calls][4:] == ["GET"]


def test_the_marker_is_found_on_a_later_page(api: FakeGitHub, body: Path) -> None:
    for i in range(150):
        api.add_comment(7, f"comment {i}")
    old = api.add_comment(7, f"{MARKER}\nold verdict", "github-actions[bot]")
    assert post(body) == 0
    assert [c.method for c in api.calls] == ["GET", "GET", "PATCH"]
    assert api.calls[-1].path == f"/repos/{REPO}/issues/comments/{old}"
    assert len(api.comments[7]) == 151


def test_a_body_without_the_marker_gets_it(api: FakeGitHub, tmp_path: Path) -> None:
    plain = tmp_path / "plain.md"
    plain.write_text("hello\n")
    assert post(plain) == 0
    assert api.comments[7][0]["body"] == f"{MARKER}\nhello\n"


@pytest.mark.parametrize("status", [403, 500])
def test_an_api_failure_is_a_warning_and_exit_0(
    api: FakeGitHub, body: Path, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    api.fail_with = status
    assert post(body) == 0
    err = capsys.readouterr().err
    assert f"mxperf: warning: the comment was not posted: GET {api.url}/repos/" in err
    assert f"HTTP {status}" in err and "fake failure" in err


def test_a_wrong_token_and_no_server_are_warnings(
    api: FakeGitHub, body: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "wrong")
    assert post(body) == 0
    assert "HTTP 401 Unauthorized: Bad credentials" in capsys.readouterr().err
    with FakeGitHub() as gone:
        url = gone.url
    monkeypatch.setenv("GITHUB_API_URL", url)  # nothing listens there any more
    assert post(body) == 0
    assert "mxperf: warning: the comment was not posted" in capsys.readouterr().err
    assert api.comments == {}


@pytest.mark.parametrize("pr", ["0", "-3", "7; rm", "abc", "", "12345678901"])
def test_a_bad_pr_number_is_exit_2(
    api: FakeGitHub, body: Path, pr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert post(body, pr) == 2
    assert f"mxperf: error: --pr: {pr!r} is not a pull request number" in capsys.readouterr().err
    assert api.calls == []


def test_missing_token_repository_or_body(
    api: FakeGitHub, body: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    assert post(body) == 2
    assert "mxperf: error: no GITHUB_TOKEN in the environment" in capsys.readouterr().err
    monkeypatch.setenv("GITHUB_TOKEN", "t0k")
    monkeypatch.setenv("GITHUB_REPOSITORY", "noslash")
    assert post(body) == 2
    assert "GITHUB_REPOSITORY 'noslash' is not owner/name" in capsys.readouterr().err
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    assert post(body.with_name("absent.md")) == 2
    assert "--body: cannot read" in capsys.readouterr().err
    assert api.calls == []


def test_next_page_reads_link_headers() -> None:
    link = '<https://a/x?page=2>; rel="next", <https://a/x?page=9>; rel="last"'
    assert github.next_page(link) == "https://a/x?page=2"
    assert github.next_page('<https://a/x?page=1>; rel="prev"') is None
    assert github.next_page("") is None


def test_posted_only_while_the_measured_commit_is_the_head(
    api: FakeGitHub, body: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.heads[7] = "b" * 40
    args = ["comment", "post", "--body", str(body), "--pr", "7", "--head-sha", "a" * 40]
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert "#7's head is bbbbbbbbbb, not the measured commit aaaaaaaaaa" in err
    assert [c.method for c in api.calls] == ["GET"] and api.comments == {}
    api.heads[7] = "a" * 40
    assert cli.main(args) == 0
    assert [(c.method, c.path) for c in api.calls][1:] == [
        ("GET", f"/repos/{REPO}/pulls/7"),
        ("GET", f"/repos/{REPO}/issues/7/comments"),
        ("POST", f"/repos/{REPO}/issues/7/comments"),
    ]
    assert cli.main([*args[:-1], "A" * 40]) == 0  # the same sha in capitals: updated
    assert len(api.comments[7]) == 1
    assert cli.main([*args[:5], "8", *args[6:]]) == 0  # no PR 8 (404): a warning
    assert "HTTP 404" in capsys.readouterr().err and 8 not in api.comments


def test_someone_elses_comment_with_the_marker_is_left_alone(api: FakeGitHub, body: Path) -> None:
    quoted = api.add_comment(7, f"{MARKER}\nI copied your marker", "mallory")
    assert post(body) == 0
    assert [c.method for c in api.calls] == ["GET", "POST"]
    assert api.comments[7][0]["body"] == f"{MARKER}\nI copied your marker"
    any_author = ["comment", "post", "--body", str(body), "--pr", "7", "--author", ""]
    assert cli.main(any_author) == 0  # a personal token's comments: any author's
    assert api.calls[-1].method == "PATCH" and api.calls[-1].path.endswith(f"/{quoted}")
