"""The fake GitHub API the ``mxperf`` commands that call GitHub are tested against."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_mxperf.testing.fakegithub import FakeGitHub

REPO = "octo/proj"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A fake API of ``REPO`` on 127.0.0.1, named by the environment as a job's would be."""
    with FakeGitHub(repo=REPO, token="t0k") as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.url)
        monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
        monkeypatch.setenv("GITHUB_TOKEN", "t0k")
        yield fake
