"""``mxperf comment``: the pull-request comment of a run.

::

    mxperf comment render REPORT.json [--out FILE] [--run-url URL]
    mxperf comment post --body FILE --pr N [--head-sha SHA]

``render`` writes the comment's Markdown from a JSON report (``--mxperf-json``). ``post`` puts it
on pull request N, updating the comment that carries the marker (``<!-- pytest-mxperf ... -->``)
or creating one: never two. The repository, token and API address come from
``GITHUB_REPOSITORY``, ``GITHUB_TOKEN`` and ``GITHUB_API_URL`` (default api.github.com); only a
comment by ``--author`` (default github-actions[bot]) is updated. An API or network failure is a
warning with exit status 0: a comment that could not be posted never fails the job. A bad PR
number, a missing token or an unreadable file is exit 2. With ``--head-sha`` (the commit that was
measured) the comment is posted only while it is the PR's head: a number that names another PR,
or a run overtaken by a newer push, posts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pytest_mxperf.cli import github
from pytest_mxperf.reporting import pr_comment as comment
from pytest_mxperf.reporting.jsonreport import ReportError, read_report
from pytest_mxperf.system import files


class CommentCommandError(Exception):
    """Bad input to ``mxperf comment``: printed in one line, exit 2."""


def add_parser(sub: Any) -> None:
    """Add ``comment render`` and ``comment post`` to ``mxperf``'s subparsers."""
    parser = sub.add_parser("comment", help="the pull-request comment of a run (render, post)")
    actions = parser.add_subparsers(dest="comment_command", required=True)
    render = actions.add_parser("render", help="the comment's Markdown from a JSON report")
    render.add_argument("report", type=Path, help="JSON report (--mxperf-json)")
    render.add_argument("--out", type=Path, help="file to write (default: standard output)")
    render.add_argument("--run-url", help="address of the CI run, linked from the comment")
    post = actions.add_parser("post", help="create or update the comment on a pull request")
    post.add_argument("--body", type=Path, required=True, help="the comment (from render)")
    post.add_argument("--pr", required=True, help="pull request number")
    post.add_argument(
        "--head-sha", help="the commit measured: post only while it is the PR's head commit"
    )
    post.add_argument(
        "--author",
        default=github.ACTIONS_BOT,
        help=f"login whose comment is updated (default {github.ACTIONS_BOT}, the workflow "
        "token's; '' for any: a personal token)",
    )


def run(root: Path, args: argparse.Namespace) -> int:
    """``mxperf comment`` (``root``, the baseline directory, is not used)."""
    if args.comment_command == "render":
        return cmd_render(args)
    return cmd_post(args, os.environ)


def cmd_render(args: argparse.Namespace) -> int:
    path: Path = args.report
    try:
        report = read_report(path)
    except ReportError as exc:
        raise CommentCommandError(str(exc)) from None
    try:
        body = comment.render(report, run_url=args.run_url)
    except comment.CommentError as exc:
        raise CommentCommandError(f"{path}: {exc}") from exc
    if args.out is None:
        sys.stdout.write(body)
        return 0
    try:
        files.write_text_atomic(args.out, body)
    except OSError as exc:
        raise CommentCommandError(f"--out: cannot write {args.out} ({exc})") from exc
    return 0


def pr_number(text: str) -> int:
    """A pull request number from the command line or an artifact: digits, at least 1."""
    value = text.strip()
    if not value.isdigit() or int(value) < 1 or len(value) > 9:
        raise CommentCommandError(f"--pr: {text!r} is not a pull request number")
    return int(value)


def client(env: Any, needs: str = "pull-requests: write") -> github.GitHub:
    """The API of the repository the environment names, or a `CommentCommandError`
    (``needs``: the token's permissions, named when there is none)."""
    token = env.get("GITHUB_TOKEN") or ""
    if not token:
        raise CommentCommandError(
            "no GITHUB_TOKEN in the environment: pass the job's token "
            f"(env: GITHUB_TOKEN: ${{{{ github.token }}}}) with {needs}"
        )
    repo = env.get("GITHUB_REPOSITORY") or ""
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise CommentCommandError(f"GITHUB_REPOSITORY {repo!r} is not owner/name")
    api = (env.get("GITHUB_API_URL") or github.DEFAULT_API).rstrip("/")
    return github.GitHub(repo=repo, token=token, api=api)


def cmd_post(args: argparse.Namespace, env: Any) -> int:
    pr = pr_number(args.pr)
    gh = client(env)
    try:
        body = Path(args.body).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommentCommandError(f"--body: cannot read {args.body} ({exc})") from exc
    if not body.startswith(comment.MARKER):
        # Without the marker the next post could not find this comment again.
        body = f"{comment.MARKER}\n{body}"
    try:
        if args.head_sha and not _is_head(gh, pr, args.head_sha.strip()):
            return 0
        github.upsert(gh, pr, body, comment.MARKER, args.author)
    except github.GitHubError as exc:
        print(f"mxperf: warning: the comment was not posted: {exc}", file=sys.stderr)
    return 0


def _is_head(gh: github.GitHub, pr: int, sha: str) -> bool:
    head = gh.head_sha(pr)
    if head.lower() == sha.lower():
        return True
    print(
        f"mxperf: warning: the comment was not posted: #{pr}'s head is {head[:10]}, not the "
        f"measured commit {sha[:10]} (a newer push, or another PR)",
        file=sys.stderr,
    )
    return False
