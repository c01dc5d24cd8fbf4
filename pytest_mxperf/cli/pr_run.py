"""``mxperf history pr-run``: the run of the pull-request workflow whose pair a main-branch job
may adopt (`history.adoption`), found through GitHub's API.

Prints the run's id when the pushed commit (``--sha``, default ``GITHUB_SHA``) is the merge of a
pull request from a branch of this repository and the PR workflow (``--workflow``, its file
name) completed a run on that PR's last head; otherwise prints nothing and says why on standard
error. A pull request from a fork is never chosen: its run executed code nobody reviewed, which
could have written any report. A failed API call is a warning, never a failed job: the job then
pairs as it would without one. The repository, token and API address come from
``GITHUB_REPOSITORY``, ``GITHUB_TOKEN`` (``actions: read``, ``pull-requests: read``) and
``GITHUB_API_URL``, as for ``mxperf comment post``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from pytest_mxperf.cli import github
from pytest_mxperf.cli.comment import client

#: Conclusions of a run whose report exists: a pass, or a regression (the job failed on it).
REPORTED = ("success", "failure")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workflow",
        default="mxperf-pr.yml",
        help="the pull-request workflow's file name (default mxperf-pr.yml)",
    )
    parser.add_argument("--sha", help="the pushed commit (default: GITHUB_SHA)")


def _say(text: str) -> None:
    print(f"mxperf history pr-run: {text}", file=sys.stderr)


def find(gh: github.GitHub, sha: str, workflow: str) -> int | None:
    """The id of the run to adopt the pair of, or None (said why). Raises `GitHubError`."""
    pull = gh.merged_pull(sha)
    if pull is None:
        _say(f"no pull request was merged as {sha[:10]} (a direct push): the job pairs itself")
        return None
    number, head = pull.get("number"), pull.get("head") or {}
    source = str((head.get("repo") or {}).get("full_name") or "")
    if source != gh.repo:
        _say(
            f"#{number} came from {source or 'a deleted repository'}, not {gh.repo}: a fork's "
            "run is never adopted (its code could write any report); the job pairs itself"
        )
        return None
    head_sha = str(head.get("sha") or "")
    for run in gh.pull_request_runs(workflow, head_sha):
        same_repo = (run.get("head_repository") or {}).get("full_name") == gh.repo
        if run.get("head_sha") == head_sha and same_repo and run.get("event") == "pull_request":
            if run.get("conclusion") in REPORTED:
                return int(run["id"])
            _say(f"the last run of {workflow} on #{number} ended {run.get('conclusion')!r}")
            return None
    _say(f"no completed run of {workflow} on #{number}'s head {head_sha[:10]}")
    return None


def run(args: argparse.Namespace, env: Mapping[str, Any]) -> int:
    sha = (args.sha or env.get("GITHUB_SHA") or "").strip()
    if not sha:
        raise github.GitHubError("no commit: pass --sha or set GITHUB_SHA")
    gh = client(env, "actions: read, pull-requests: read")
    try:
        found = find(gh, sha, args.workflow)
    except github.GitHubError as exc:
        _say(f"warning: {exc}; the job pairs itself")
        return 0
    if found is not None:
        print(found)
    return 0
