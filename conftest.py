"""Shared fixtures of this repository's suites: fake back ends and git repositories for the
plugin's own tests, and the quick/full selection of the model benchmark suite."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable

import pytest

FAKE_BACKEND_CONFTEST = """
import pytest
from pytest_mxperf.testing import FakeBackend, FakeModel

@pytest.fixture(scope="session")
def mxperf_backend():
    return FakeBackend()
"""

GIT_ENV = {
    "GIT_AUTHOR_NAME": "mxperf test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "mxperf test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--suite",
        choices=("quick", "full"),
        default=os.environ.get("MXPERF_SUITE", "quick"),
        help="Model benchmark suite selection: quick (2-core CPU, default) or full "
        "(every published network and batch size 1-256, for GPU runners). Env MXPERF_SUITE.",
    )


def git(path: Path, *args: str) -> str:
    """Run git in ``path`` with a fixed identity; return stdout."""
    env = {**os.environ, **GIT_ENV}
    for name in ("GITHUB_SHA", "CI_COMMIT_SHA", "PYTEST_MXPERF_COMMIT", "GIT_COMMIT"):
        env.pop(name, None)
    done = subprocess.run(
        ["git", *args], cwd=path, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def fake_pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester whose runs measure with `pytest_mxperf.testing.FakeBackend`."""
    for name in list(os.environ):
        if name.startswith("PYTEST_MXPERF_") or name in ("GITHUB_SHA", "CI_COMMIT_SHA"):
            monkeypatch.delenv(name)
    pytester.makeconftest(FAKE_BACKEND_CONFTEST)
    return pytester


@pytest.fixture
def commit(fake_pytester: pytest.Pytester) -> Callable[[str], str]:
    """Turn the pytester directory into a git repository; ``commit(msg)`` commits all, -> sha."""
    path = fake_pytester.path
    git(path, "init", "-q", "-b", "main")
    (path / ".gitignore").write_text("__pycache__/\n*.json.tmp\nreport.json\n")

    def do(message: str = "change") -> str:
        git(path, "add", "-A")
        git(path, "commit", "-q", "--allow-empty", "-m", message)
        return git(path, "rev-parse", "HEAD")

    return do
