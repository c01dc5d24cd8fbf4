"""The few calls of GitHub's REST API that one sticky pull-request comment needs, with urllib:
a PR's head commit, its issue comments (all pages), create one, update one; and the two a
main-branch job needs to find the pair of the pull request it merged: the PR merged as a commit,
the completed runs of a workflow at a commit."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_API = "https://api.github.com"

#: Pages of 100 comments; a PR with more than this many pages is not searched further.
MAX_PAGES = 50


class GitHubError(Exception):
    """An API call failed (HTTP error, network, unreadable answer): named in one line."""


@dataclass(frozen=True)
class GitHub:
    """The API of one repository (``owner/name``) with a token."""

    repo: str
    token: str
    api: str = DEFAULT_API
    timeout: float = 30.0

    def _call(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[Any, str]:
        """(the decoded JSON answer, its ``Link`` header)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", "pytest-mxperf")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                raw = answer.read()
                link = answer.headers.get("Link") or ""
        except urllib.error.HTTPError as exc:
            detail = _message(exc.read())
            raise GitHubError(f"{method} {url}: HTTP {exc.code} {exc.reason}{detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            why = getattr(exc, "reason", exc)
            raise GitHubError(f"{method} {url}: {why}") from exc
        try:
            return (json.loads(raw) if raw else None), link
        except ValueError as exc:
            raise GitHubError(f"{method} {url}: the answer is not JSON") from exc

    def comments(self, pr: int) -> list[dict[str, Any]]:
        """Every issue comment of pull request ``pr``, following the ``Link: rel="next"``
        pages (only within this API's address)."""
        url = f"{self.api}/repos/{self.repo}/issues/{pr}/comments?per_page=100"
        found: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            page, link = self._call("GET", url)
            if not isinstance(page, list):
                raise GitHubError(f"GET {url}: expected a list of comments")
            found += [c for c in page if isinstance(c, dict)]
            following = next_page(link)
            if following is None or not following.startswith(self.api + "/"):
                break
            url = following
        return found

    def head_sha(self, pr: int) -> str:
        """The commit at the head of pull request ``pr`` now."""
        url = f"{self.api}/repos/{self.repo}/pulls/{pr}"
        answer, _ = self._call("GET", url)
        sha = answer.get("head", {}).get("sha") if isinstance(answer, dict) else None
        if not isinstance(sha, str):
            raise GitHubError(f"GET {url}: no head commit in the answer")
        return sha

    def merged_pull(self, sha: str) -> dict[str, Any] | None:
        """The pull request merged as commit ``sha`` (whose ``merge_commit_sha`` it is: a merge,
        squash or rebase merge), or None (a direct push)."""
        url = f"{self.api}/repos/{self.repo}/commits/{sha}/pulls"
        answer, _ = self._call("GET", url)
        if not isinstance(answer, list):
            raise GitHubError(f"GET {url}: expected a list of pull requests")
        return next(
            (
                p
                for p in answer
                if isinstance(p, dict) and p.get("merged_at") and p.get("merge_commit_sha") == sha
            ),
            None,
        )

    def pull_request_runs(self, workflow: str, head_sha: str) -> list[dict[str, Any]]:
        """The completed ``pull_request`` runs of ``workflow`` (its file name) at ``head_sha``,
        newest first."""
        url = (
            f"{self.api}/repos/{self.repo}/actions/workflows/{workflow}/runs"
            f"?event=pull_request&status=completed&head_sha={head_sha}&per_page=100"
        )
        answer, _ = self._call("GET", url)
        runs = answer.get("workflow_runs") if isinstance(answer, dict) else None
        if not isinstance(runs, list):
            raise GitHubError(f"GET {url}: no workflow_runs in the answer")
        found = [r for r in runs if isinstance(r, dict) and isinstance(r.get("id"), int)]
        return sorted(found, key=lambda r: int(r["id"]), reverse=True)

    def create(self, pr: int, body: str) -> dict[str, Any]:
        url = f"{self.api}/repos/{self.repo}/issues/{pr}/comments"
        answer, _ = self._call("POST", url, {"body": body})
        return answer if isinstance(answer, dict) else {}

    def update(self, comment_id: int, body: str) -> dict[str, Any]:
        url = f"{self.api}/repos/{self.repo}/issues/comments/{comment_id}"
        answer, _ = self._call("PATCH", url, {"body": body})
        return answer if isinstance(answer, dict) else {}


def next_page(link: str) -> str | None:
    """The ``rel="next"`` address of a ``Link`` header, if any."""
    for part in link.split(","):
        found = re.match(r'\s*<([^>]+)>\s*;.*\brel="?next"?', part)
        if found:
            return found.group(1)
    return None


def _message(raw: bytes) -> str:
    try:
        text = json.loads(raw).get("message")
    except (ValueError, AttributeError):
        return ""
    return f": {text}" if text else ""


#: Who posts with a workflow's own token.
ACTIONS_BOT = "github-actions[bot]"


def upsert(
    gh: GitHub,
    pr: int,
    body: str,
    marker: str,
    author: str = ACTIONS_BOT,
    say: Callable[[str], None] = print,
) -> str:
    """Update the PR's comment by ``author`` (any author: ``""``) that starts with ``marker``
    (the oldest, if several), else create one: ``"updated"``, ``"unchanged"`` or
    ``"created"``. Raises `GitHubError`. Someone else's comment that quotes the marker is never
    edited."""
    ours = [
        c
        for c in gh.comments(pr)
        if str(c.get("body") or "").startswith(marker)
        and (not author or (c.get("user") or {}).get("login") == author)
    ]
    if ours:
        first = min(ours, key=lambda c: int(c.get("id") or 0))
        if first.get("body") == body:
            say(f"mxperf: comment {first.get('id')} on #{pr} is up to date")
            return "unchanged"
        gh.update(int(first["id"]), body)
        say(f"mxperf: updated comment {first['id']} on #{pr}")
        return "updated"
    made = gh.create(pr, body)
    say(f"mxperf: commented on #{pr} ({made.get('html_url') or made.get('id') or 'created'})")
    return "created"
