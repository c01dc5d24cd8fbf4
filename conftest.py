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


#: A real-MXNet benchmark suite for regression tests and scripts/aa_check.py: a tiny model-zoo
#: net in two cases. `steady` never changes. `target` runs the same net through a plain callable
#: whose work per batch can be raised by construction: MXPERF_EXTRA_WORK=0.4 adds a second
#: forward pass on 2 of every 5 calls (7 passes per 5 batches: 40% more work per batch).
REAL_SUITE = '''
import itertools
import os
import pytest

MODEL = os.environ.get("MXPERF_TEST_MODEL", "resnet18_v1")
SIZE = int(os.environ.get("MXPERF_TEST_SIZE", "32"))
BATCH = 10


def build():
    from mxnet.gluon.model_zoo import vision

    return vision.get_model(MODEL, classes=10)


@pytest.mark.parametrize("which", ["target", "steady"])
def test_infer(mxperf, which):
    shape = (3, SIZE, SIZE)
    label = f"{MODEL}-{which}"
    if which == "steady":
        mxperf.inference(build(), batch_size=BATCH, input_shape=shape, model=label)
        return
    import mxnet as mx

    net = build()
    net.initialize(mx.init.Xavier(magnitude=2))
    net.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.random.uniform(-1, 1, shape=(BATCH, *shape))
    extra = round(float(os.environ.get("MXPERF_EXTRA_WORK", "0")) * 5)
    calls = itertools.count()

    def step():
        out = net(x)
        if next(calls) % 5 < extra:
            out = net(x)
        return out

    mxperf.callable(step, items_per_call=BATCH, model=label)
'''
