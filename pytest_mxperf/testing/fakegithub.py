"""A fake of the GitHub REST API's issue comments on 127.0.0.1, recording every call: for
tests of ``mxperf comment post`` and of the example workflows (`pytest_mxperf.testing.workflows`).

::

    with FakeGitHub(repo="me/proj", token="t0k") as api:
        env = {"GITHUB_API_URL": api.url, "GITHUB_REPOSITORY": "me/proj", "GITHUB_TOKEN": "t0k"}
        ...
        assert [c.method for c in api.calls] == ["GET", "POST"]

It serves ``GET /repos/{repo}/pulls/{n}`` (the head commit of ``heads``),
``GET /repos/{repo}/commits/{sha}/pulls`` (the pull request of ``merged``),
``GET /repos/{repo}/actions/workflows/{file}/runs`` (``runs`` of that file, filtered by the
query's ``event``, ``status`` and ``head_sha``),
``GET/POST /repos/{repo}/issues/{n}/comments`` (pages of ``per_page``, with a ``Link``
header) and ``PATCH /repos/{repo}/issues/comments/{id}``; a wrong token is 401, another address
404, and ``fail_with`` answers every call with that HTTP status.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Call:
    """One request the fake received."""

    method: str
    path: str
    body: dict[str, Any] | None
    token: str | None


@dataclass
class FakeGitHub:
    """The fake API of one repository; a context manager that starts and stops its server."""

    repo: str = "octo/proj"
    token: str = "fake-token"
    fail_with: int | None = None
    calls: list[Call] = field(default_factory=list)
    #: Pull request number -> its head commit (``GET /repos/{repo}/pulls/{n}``).
    heads: dict[int, str] = field(default_factory=dict)
    #: A merged commit -> the pull request merged as it (``GET /repos/{repo}/commits/{sha}/pulls``).
    merged: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Workflow runs (``{"id", "path", "event", "status", "conclusion", "head_sha", ...}``).
    runs: list[dict[str, Any]] = field(default_factory=list)
    #: Pull request number -> its comments (``{"id", "body", "user"}``), oldest first.
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _next_id: int = 1000
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add_comment(self, pr: int, body: str, user: str = "someone") -> int:
        """A comment already on pull request ``pr`` (not recorded as a call)."""
        with self._lock:
            self._next_id += 1
            self.comments.setdefault(pr, []).append(
                {"id": self._next_id, "body": body, "user": {"login": user}}
            )
            return self._next_id

    def __enter__(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.serve(self, "GET")

            def do_POST(self) -> None:
                fake.serve(self, "POST")

            def do_PATCH(self) -> None:
                fake.serve(self, "PATCH")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll: shutdown() waits for it (0.5 s by default, in every test).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def serve(self, request: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(request.path)
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        auth = request.headers.get("Authorization") or ""
        token = auth.removeprefix("Bearer ") if auth else None
        with self._lock:
            self.calls.append(Call(method, parts.path, body, token))
        if self.fail_with is not None:
            return _answer(request, self.fail_with, {"message": "fake failure"})
        if token != self.token:
            return _answer(request, 401, {"message": "Bad credentials"})
        repo = f"/repos/{re.escape(self.repo)}"
        listing = re.fullmatch(rf"{repo}/issues/(\d+)/comments", parts.path)
        edit = re.fullmatch(rf"{repo}/issues/comments/(\d+)", parts.path)
        pull = re.fullmatch(rf"{repo}/pulls/(\d+)", parts.path)
        if pull and method == "GET" and int(pull.group(1)) in self.heads:
            number = int(pull.group(1))
            return _answer(request, 200, {"number": number, "head": {"sha": self.heads[number]}})
        if listing and method == "GET":
            return self._list(request, int(listing.group(1)), parse_qs(parts.query))
        merged = re.fullmatch(rf"{repo}/commits/([0-9a-f]+)/pulls", parts.path)
        if merged and method == "GET":
            found = self.merged.get(merged.group(1))
            return _answer(request, 200, [] if found is None else [found])
        runs = re.fullmatch(rf"{repo}/actions/workflows/([\w.-]+)/runs", parts.path)
        if runs and method == "GET":
            return self._runs(request, runs.group(1), parse_qs(parts.query))
        if listing and method == "POST" and body is not None:
            made = self.add_comment(int(listing.group(1)), str(body["body"]), "github-actions[bot]")
            return _answer(request, 201, {"id": made, "body": body["body"]})
        if edit and method == "PATCH" and body is not None:
            for found in (c for cs in self.comments.values() for c in cs):
                if found["id"] == int(edit.group(1)):
                    found["body"] = body["body"]
                    return _answer(request, 200, found)
        return _answer(request, 404, {"message": "Not Found"})

    def _runs(
        self, request: BaseHTTPRequestHandler, workflow: str, query: dict[str, list[str]]
    ) -> None:
        wanted = {k: query[k][0] for k in ("event", "status", "head_sha") if k in query}
        found = [
            r
            for r in self.runs
            if str(r.get("path", "")).endswith(f"/{workflow}")
            and all(r.get(k) == v for k, v in wanted.items())
        ]
        _answer(request, 200, {"total_count": len(found), "workflow_runs": found})

    def _list(self, request: BaseHTTPRequestHandler, pr: int, query: dict[str, list[str]]) -> None:
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        every = self.comments.get(pr, [])
        shown = every[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(every):
            path = f"/repos/{self.repo}/issues/{pr}/comments"
            headers["Link"] = f'<{self.url}{path}?per_page={per_page}&page={page + 1}>; rel="next"'
        _answer(request, 200, shown, headers)


def _answer(
    request: BaseHTTPRequestHandler, status: int, data: Any, headers: dict[str, str] | None = None
) -> None:
    raw = json.dumps(data).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(raw)))
    for name, value in (headers or {}).items():
        request.send_header(name, value)
    request.end_headers()
    request.wfile.write(raw)
