"""Git repositories for tests and scripts that need a commit history: git with a fixed identity
(`git`, `GIT_ENV`) and a small real-MXNet suite to commit into one (`REAL_SUITE`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: A fixed identity, so tests and scripts commit anywhere (no global git config needed).
GIT_ENV = {
    "GIT_AUTHOR_NAME": "mxperf test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "mxperf test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(path: Path, *args: str) -> str:
    """Run git in ``path`` with a fixed identity; return stdout."""
    env = {**os.environ, **GIT_ENV}
    for name in ("GITHUB_SHA", "CI_COMMIT_SHA", "PYTEST_MXPERF_COMMIT", "GIT_COMMIT"):
        env.pop(name, None)
    done = subprocess.run(
        ["git", *args], cwd=path, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


#: A real-MXNet benchmark suite for regression tests and scripts/aa_check.py: a tiny model-zoo
#: net in two cases. `steady` never changes. `target` runs the same net through a plain callable
#: whose work per batch can be raised by construction: MXPERF_EXTRA_WORK=0.4 (or 0.4 in a
#: committed extra_work.txt) adds 0.4 forward passes per batch on average (40% more work).
REAL_SUITE = """
import os
from pathlib import Path

import pytest

MODEL = os.environ.get("MXPERF_TEST_MODEL", "resnet18_v1")
SIZE = int(os.environ.get("MXPERF_TEST_SIZE", "32"))
BATCH = int(os.environ.get("MXPERF_TEST_BATCH", "10"))


def build():
    if MODEL.startswith("convs"):  # "convs20": 20 Conv2D of 32 channels (a user's net)
        from mxnet.gluon import nn

        net = nn.HybridSequential()
        for _ in range(int(MODEL[len("convs"):] or 20)):
            net.add(nn.Conv2D(32, 3, padding=1, activation="relu"))
        net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
        return net
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
    # The work is part of the code: a committed file (paired runs compare commits) or the
    # environment; 0.25 = one more forward pass every 4 batches, spread evenly.
    committed = Path(__file__).with_name("extra_work.txt")
    extra = float(
        os.environ.get("MXPERF_EXTRA_WORK")
        or (committed.read_text() if committed.exists() else "0")
    )
    owed = [0.0]

    def step():
        out = net(x)
        owed[0] += extra
        while owed[0] >= 1.0:
            out = net(x)
            owed[0] -= 1.0
        return out

    mxperf.callable(step, items_per_call=BATCH, model=label)
"""
