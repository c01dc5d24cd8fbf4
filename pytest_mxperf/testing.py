"""A fake back end with a virtual clock, for testing suites and the plugin without MXNet.

Override the ``mxperf_backend`` fixture in a conftest::

    from pytest_mxperf.testing import FakeBackend, FakeModel

    @pytest.fixture
    def mxperf_backend():
        return FakeBackend()

    def test_toy(mxperf):
        mxperf.inference(FakeModel(images_per_sec=500), batch_size=8, model="toy")

Every step advances the clock by ``batch_size / images_per_sec`` seconds, so results are exact
and tests never depend on the speed of the machine.
"""

from __future__ import annotations

import os
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mxperf.measure import Measurement
from pytest_mxperf.protocol import ModelTypeError, Prepared, PrepareSpec, looks_like_oom

#: MXNet's message when cudaMalloc fails (src/storage/pooled_storage_manager.h).
OOM_MESSAGE = (
    "[12:00:00] src/storage/./pooled_storage_manager.h:161: cudaMalloc retry failed: out of memory"
)


CALLABLE_SECONDS = 0.001


def measurement_of(images_per_sec: float, rel_iqr: float = 0.0) -> Measurement:
    """A `Measurement` of three blocks whose median is ``images_per_sec`` and whose relative
    IQR is ``rel_iqr``: for tests of verdicts and reports that need exact figures."""
    rates = [images_per_sec * (1 - rel_iqr), images_per_sec, images_per_sec * (1 + rel_iqr)]
    return Measurement(
        items_per_step=1,
        steps_per_block=1,
        block_seconds=tuple(1 / r for r in rates),
        warmup_steps=12,
        warmup_seconds=0.5,
        warmup_steady=True,
        first_step_seconds=0.1,
        sync_seconds=1e-5,
    )


@dataclass(frozen=True)
class FakeArray:
    """A batch array for fake data sources: only its shape is read (images = ``shape[0]``)."""

    shape: tuple[int, ...]


class MXNetError(Exception):
    """Stands in for ``mxnet.base.MXNetError``."""


@dataclass
class FakeModel:
    """A model whose speed is declared: training is ``train_factor`` times slower."""

    images_per_sec: float
    train_factor: float = 3.0
    jitter: float = 0.0
    oom_from_batch: int | None = None
    nan: bool = False
    first_step_seconds: float = 0.5
    seed: int = 0


@dataclass(frozen=True)
class FakeContext:
    device_type: str
    device_id: int = 0


class FakeBackend:
    """A `pytest_mxperf.protocol.Backend` on a virtual clock: every step of a `FakeModel`
    advances it by ``batch_size / images_per_sec`` seconds."""

    def __init__(self, gpus: int = 0, software: dict[str, Any] | None = None) -> None:
        self.now = 0.0
        self.gpus = gpus
        self.syncs = 0
        self._software = software or {"mxnet": "fake-1.9.1", "python": "3.11", "numpy": "1.23"}

    def clock(self) -> float:
        return self.now

    def sync(self) -> None:
        self.syncs += 1

    def num_gpus(self) -> int:
        return self.gpus

    def context(self, kind: str, index: int = 0) -> FakeContext:
        return FakeContext(kind, index)

    @staticmethod
    def describe(ctx: Any) -> tuple[str, int]:
        return str(ctx.device_type), int(ctx.device_id)

    def is_oom(self, exc: BaseException) -> bool:
        return looks_like_oom(exc, MXNetError)

    def software(self) -> dict[str, Any]:
        return dict(self._software)

    def prepare(self, model: Any, spec: PrepareSpec) -> Prepared:
        mode, batch_size, items_per_call = spec.mode, spec.batch_size, spec.items_per_call
        if not isinstance(model, FakeModel):
            if callable(model) and items_per_call:
                seen = {"result": False}

                def call() -> None:
                    if model() is not None:
                        seen["result"] = True
                    self.now += CALLABLE_SECONDS  # a plain callable "takes" 1 ms per call

                return Prepared(call, items_per_call, computed=lambda: seen["result"])
            raise ModelTypeError(
                f"FakeBackend benchmarks FakeModel objects, not {type(model).__name__}"
            )
        if model.oom_from_batch is not None and batch_size >= model.oom_from_batch:
            raise MXNetError(OOM_MESSAGE)
        rng = random.Random(model.seed)
        rate = model.images_per_sec / (model.train_factor if mode != "inference" else 1.0)
        state = {"first": True}

        def step() -> None:
            if state.pop("first", False):
                self.now += model.first_step_seconds
                return
            noise = 1 + rng.uniform(-model.jitter, model.jitter)
            self.now += batch_size / rate * noise

        def check() -> str | None:
            return "model output contains NaN/inf (8 of 8 values)" if model.nan else None

        return Prepared(step, batch_size * (items_per_call or 1), check, info={"form": "fake"})


# git repositories for tests and scripts ----------------------------------------------------
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
#: whose work per batch can be raised by construction: MXPERF_EXTRA_WORK=0.4 adds a second
#: forward pass on 2 of every 5 calls (7 passes per 5 batches: 40% more work per batch).
REAL_SUITE = """
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
"""
