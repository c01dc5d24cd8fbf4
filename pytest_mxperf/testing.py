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

import random
from dataclasses import dataclass
from typing import Any

from pytest_mxperf.backend import Prepared, looks_like_oom

#: MXNet's message when cudaMalloc fails (src/storage/pooled_storage_manager.h).
OOM_MESSAGE = (
    "[12:00:00] src/storage/./pooled_storage_manager.h:161: cudaMalloc retry failed: out of memory"
)


CALLABLE_SECONDS = 0.001


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
    """Implements the back-end interface of `pytest_mxperf.backend.MXNetBackend`."""

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

    def prepare(
        self,
        model: Any,
        *,
        mode: str,
        batch_size: int,
        ctx: Any,
        items_per_call: int | None = None,
        **_: Any,
    ) -> Prepared:
        if not isinstance(model, FakeModel):
            if callable(model) and items_per_call:

                def call() -> None:
                    model()
                    self.now += CALLABLE_SECONDS  # a plain callable "takes" 1 ms per call

                return Prepared(call, items_per_call)
            raise TypeError(f"FakeBackend benchmarks FakeModel objects, not {type(model).__name__}")
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
