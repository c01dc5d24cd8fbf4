"""The example user project (``examples/user-project``) and its workflows in the scenarios a user
meets: a pull request (from the repository or a fork, pushed to again), the comment posted from
it, a push to main, the self-hosted refresh. For the suite and ``scripts/workflow_demo.py``.

The project is copied into a scratch repository (``origin``, a bare repository standing in for
GitHub's copy; ``work``, the developer's clone that commits and pushes). With ``fake=True`` the
copy also gets a root ``conftest.py`` (not part of the example) that measures with the fake back
end: each network is a `FakeModel` at the speed ``fake_speeds.json`` gives its class, so a
change of that file is a change of speed, and paired runs take seconds.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf.testing.fakegithub import FakeGitHub
from pytest_mxperf.testing.repos import git
from pytest_mxperf.testing.workflow_steps import Event, Runner, RunResult

REPO = "octo/user-project"
#: Where a fork's pull request comes from.
FORK = "someone/user-project"

#: The speeds of the networks under the fake back end, by class name (images/sec).
SPEEDS = {"TinyCNN": 2000.0, "MLP": 8000.0, "MobileNet": 1000.0}

FAKE_CONFTEST = '''"""Test harness only, not part of the example project: the fake back end
measures each network as a FakeModel at the speed fake_speeds.json gives its class."""

import json
import pathlib

import pytest

from pytest_mxperf.testing import FakeBackend, FakeModel

SPEEDS = json.loads((pathlib.Path(__file__).parent / "fake_speeds.json").read_text())


class ByClass(FakeBackend):
    def prepare(self, model, spec):
        return super().prepare(FakeModel(SPEEDS[type(model).__name__]), spec)


@pytest.fixture(scope="session")
def mxperf_backend():
    return ByClass()
'''


@dataclass
class Project:
    """The scratch copy of the example: ``work`` commits, ``origin`` is GitHub's copy."""

    origin: Path
    work: Path

    @property
    def workflows(self) -> Path:
        return self.work / ".github" / "workflows"

    def commit(self, message: str) -> str:
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.work, "rev-parse", "HEAD")

    def push(self, *refs: str) -> None:
        for ref in refs:
            git(self.work, "push", "-q", "-f", "origin", f"HEAD:{ref}")

    def set_speeds(self, **speeds: float) -> None:
        path = self.work / "fake_speeds.json"
        data = json.loads(path.read_text()) if path.exists() else dict(SPEEDS)
        data.update(speeds)
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    def main_sha(self) -> str:
        return git(self.origin, "rev-parse", "main")


def make_project(example: Path, root: Path, fake: bool) -> Project:
    """The example copied to ``root/work`` with one commit ("base") pushed to origin's main."""
    origin, work = root / "origin.git", root / "work"
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    ignore = shutil.ignore_patterns("__pycache__", ".venv", "mxperf*.json", "*.md.tmp")
    shutil.copytree(example, work, ignore=ignore)
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", str(origin))
    project = Project(origin, work)
    if fake:
        (work / "conftest.py").write_text(FAKE_CONFTEST)
        project.set_speeds()
    project.commit("base")
    project.push("refs/heads/main")
    return project


@dataclass
class Scenarios:
    """The project's workflows run by ``runner``, the GitHub API being ``api``."""

    project: Project
    runner: Runner
    api: FakeGitHub
    #: The API calls each run made, by run id.
    calls: dict[int, list[Any]] = field(default_factory=dict)

    def _run(self, name: str, event: Event) -> RunResult:
        before = len(self.api.calls)
        result = self.runner.run(self.project.workflows / name, event)
        self.calls[result.run_id] = list(self.api.calls[before:])
        return result

    def pull_request(
        self, number: int, sha: str, fork: bool = False
    ) -> tuple[RunResult, RunResult]:
        """A push to PR ``number`` (head ``sha``, base main): the PR workflow, then the
        comment workflow that its completion starts."""
        head_repo = FORK if fork else REPO
        self.project.push(f"refs/pull/{number}/head")
        if not fork:
            self.project.push("refs/heads/feature")
        self.api.heads[number] = sha
        payload = {
            "number": number,
            "pull_request": {
                "number": number,
                "head": {"sha": sha, "ref": "feature", "repo": {"full_name": head_repo}},
                "base": {"ref": "main", "repo": {"full_name": REPO}},
            },
        }
        # A fork's PR run has no token with any write access; the harness gives it none at all.
        token = "" if fork else "read-only-token"
        event = Event(
            "pull_request", sha, f"refs/pull/{number}/merge", payload, "main", "feature", token
        )
        pr = self._run("mxperf-pr.yml", event)
        self.api.runs.append(
            {
                "id": pr.run_id,
                "path": ".github/workflows/mxperf-pr.yml",
                "event": "pull_request",
                "status": "completed",
                "conclusion": pr.conclusion,
                "head_sha": sha,
                "head_repository": {"full_name": head_repo},
            }
        )
        return pr, self.comment(pr, number, sha, fork)

    def merge(self, number: int, fork: bool = False) -> RunResult:
        """Pull request ``number`` (the work clone's HEAD, on main) squash-merged: one new
        commit with its tree, pushed to main; the main workflow's run on it."""
        before = self.project.main_sha()
        head = git(self.project.work, "rev-parse", "HEAD")
        subject = git(self.project.work, "log", "-1", "--format=%s")
        git(self.project.work, "reset", "-q", "--soft", before)
        merged = self.project.commit(f"{subject} (#{number})")
        self.api.merged[merged] = {
            "number": number,
            "merged_at": "2026-11-29T12:00:00Z",
            "merge_commit_sha": merged,
            "head": {
                "sha": head,
                "repo": {"full_name": FORK if fork else REPO},
            },
            "base": {"ref": "main", "repo": {"full_name": REPO}},
        }
        return self.push_main(before)

    def comment(self, pr: RunResult, number: int, sha: str, fork: bool = False) -> RunResult:
        """The comment workflow, started by the completion of the PR workflow's run ``pr``."""
        finished = {
            "workflow_run": {
                "id": pr.run_id,
                "event": "pull_request",
                "conclusion": pr.conclusion,
                "head_sha": sha,
                "head_branch": "feature",
                "head_repository": {
                    "full_name": FORK if fork else REPO,
                },
                # GitHub lists no pull requests here for a fork's run.
                "pull_requests": [] if fork else [{"number": number}],
            }
        }
        main = self.project.main_sha()
        event = Event(
            "workflow_run",
            main,
            "refs/heads/main",
            finished,
            token=self.api.token,
            source=pr.workflow,
        )
        return self._run("mxperf-comment.yml", event)

    def push_main(self, before: str, workflow: str = "mxperf-main.yml") -> RunResult:
        """The work clone's HEAD pushed to main after ``before``."""
        self.project.push("refs/heads/main")
        after = self.project.main_sha()
        payload = {"before": before, "after": after, "ref": "refs/heads/main"}
        return self._run(
            workflow, Event("push", after, "refs/heads/main", payload, token=self.api.token)
        )

    def dispatch(self, workflow: str) -> RunResult:
        """A manual run (workflow_dispatch) on main."""
        main = self.project.main_sha()
        return self._run(
            workflow, Event("workflow_dispatch", main, "refs/heads/main", {}, token=self.api.token)
        )


@contextmanager
def scenarios(
    example: Path,
    root: Path,
    fake: bool = True,
    env: dict[str, str] | None = None,
    variables: dict[str, str] | None = None,
) -> Iterator[Scenarios]:
    """The example as a scratch project with a fake GitHub API, for the scenarios above
    (``variables``: the repository's configuration variables, the ``vars`` context)."""
    project = make_project(example, root, fake)
    with FakeGitHub(repo=REPO, token="write-token") as api:
        runner = Runner(
            project.origin, root / "runner", REPO, api.url, dict(env or {}), dict(variables or {})
        )
        yield Scenarios(project, runner, api)


def history_on_origin(s: Scenarios, branch: str = "mxperf-history") -> list[dict[str, Any]]:
    """The entries the main workflow pushed to ``branch`` of the origin (GitHub's copy)."""
    text = git(s.project.origin, "show", f"{branch}:history.jsonl")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def comment_of(s: Scenarios, number: int) -> str:
    """The mxperf comment on PR ``number`` (one, or an AssertionError)."""
    ours = [c["body"] for c in s.api.comments.get(number, []) if "<!-- pytest-mxperf" in c["body"]]
    assert len(ours) == 1, f"{len(ours)} mxperf comments on #{number}"
    return str(ours[0])


#: Settings for a real-MXNet run that must take seconds: one tiny case, short measuring.
QUICK_REAL = {
    "PYTEST_ADDOPTS": "-k tiny_cnn_inference",
    "PYTEST_MXPERF_MIN_TIME": "0.3",
    "PYTEST_MXPERF_MAX_TIME": "0.6",
    "PYTEST_MXPERF_WARMUP_TIME": "0.5",
    "PYTEST_MXPERF_MAX_ROUNDS": "4",
}
