"""The ``mxperf`` fixture object: measure a model, judge it, hand the result to the test."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf import fingerprint
from pytest_mxperf.markers import MarkerSpec
from pytest_mxperf.measure import MeasureConfig, Measurement, measure
from pytest_mxperf.options import Settings
from pytest_mxperf.session import RunInfo
from pytest_mxperf.verdict import ERROR, NAN, OOM, REGRESSED, CaseResult, Policy, judge

FP16_CPU_REASON = (
    "float16 on CPU: MXNet 1.9 has no float16 GEMM on CPU (benchmark_score skips it too)"
)


@contextlib.contextmanager
def device_lock(lock_dir: str, name: str) -> Iterator[None]:
    """Hold an exclusive cross-process lock: two benchmarks never measure on the same device
    (all CPU cases share one lock; each GPU has its own)."""
    os.makedirs(lock_dir, exist_ok=True)
    with open(Path(lock_dir) / f"{name}.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class MxPerf:
    """Benchmarks MXNet models inside a test; one object per test, from the ``mxperf`` fixture.

    Each call measures one case and returns its `CaseResult` (``.images_per_sec``, ``.verdict``
    ...). A regression or a missed expectation fails the test after its body has run.
    """

    def __init__(
        self,
        *,
        item: pytest.Item,
        settings: Settings,
        run: RunInfo,
        backend: Any,
        marker: MarkerSpec,
        default_ctx: Any,
        seen: dict[str, str],
    ) -> None:
        self._item = item
        self._settings = settings
        self._run = run
        self._backend = backend
        self._marker = marker
        self._default_ctx = default_ctx
        self._seen = seen
        self.results: list[CaseResult] = []

    # public API -------------------------------------------------------------------------------
    def inference(self, net: Any, *, batch_size: int, **options: Any) -> CaseResult:
        """Forward passes only (``net(x)``; ``mod.forward(is_train=False)`` for a Symbol).

        :param net: a Gluon (Hybrid)Block, an ``mx.sym.Symbol``, or the prefix of exported
            ``prefix-symbol.json`` / ``prefix-NNNN.params`` files.
        :param options: ``model`` (label of the case), ``name`` (extra key part), ``ctx``,
            ``dtype`` (float32/float16), ``input_shape`` (default ``(3, 224, 224)``).
        """
        return self._case(net, "inference", batch_size, **options)

    def training(self, net: Any, *, batch_size: int, **options: Any) -> CaseResult:
        """Forward + backward + optimizer update; also takes ``loss``, ``optimizer``,
        ``optimizer_params``, ``num_classes`` (default: softmax cross-entropy on random labels,
        SGD with learning rate 0.01 and momentum 0.9, multi_precision for float16)."""
        return self._case(net, "training", batch_size, **options)

    def forward_backward(self, net: Any, *, batch_size: int, **options: Any) -> CaseResult:
        """Forward + backward without an optimizer update (same options as `training`)."""
        return self._case(net, "forward_backward", batch_size, **options)

    def callable(
        self, fn: Any, *, items_per_call: int, mode: str = "inference", **options: Any
    ) -> CaseResult:
        """Any function that does ``items_per_call`` images of work per call; the device is
        synced at the end of every timed block."""
        return self._case(fn, mode, items_per_call, items_per_call=items_per_call, **options)

    def _label(self, model: str | None) -> str:
        if model:
            return model
        if self._marker.model:
            return self._marker.model
        name = getattr(self._item, "originalname", None) or self._item.name
        return name[5:] if name.startswith("test_") else name

    def _case(
        self,
        net: Any,
        mode: str,
        batch_size: int,
        *,
        model: str | None = None,
        name: str | None = None,
        ctx: Any = None,
        dtype: str = "float32",
        **kwargs: Any,
    ) -> CaseResult:
        label = self._label(model)
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if dtype not in ("float32", "float16"):
            raise ValueError(f"dtype must be float32 or float16, got {dtype!r}")
        backend = self._backend
        ctx = self._default_ctx if ctx is None else ctx
        kind, index = backend.describe(ctx)
        if dtype == "float16" and kind == "cpu":
            pytest.skip(FP16_CPU_REASON)
        key = "/".join([label, mode, dtype, f"bs{batch_size}", kind] + ([name] if name else []))
        if key in self._seen:
            pytest.fail(
                f"mxperf: case key {key!r} is measured twice in this run (first by "
                f"{self._seen[key]}); pass name= to tell the cases apart",
                pytrace=False,
            )
        self._seen[key] = self._item.nodeid
        hardware = self._run.hardware_for(kind, index, self._settings.machine)
        result = CaseResult(
            key=key,
            model=label,
            mode=mode,
            dtype=dtype,
            batch_size=batch_size,
            device=f"{kind}({index})",
            device_kind=kind,
            hardware=hardware,
            threads=fingerprint.threads_in_force(os.environ),
            environment=fingerprint.perf_environment(os.environ),
            nodeid=self._item.nodeid,
            worker=os.environ.get("PYTEST_XDIST_WORKER"),
        )
        lock = "cpu" if kind == "cpu" else f"gpu{index}"
        with device_lock(self._run.lock_dir, lock):
            start = time.time()
            result = self._measure(result, net, ctx, kwargs)
            result.window = [start, time.time()]
        self.results.append(result)
        return result

    def _measure(
        self, result: CaseResult, net: Any, ctx: Any, kwargs: dict[str, Any]
    ) -> CaseResult:
        backend = self._backend
        settings = self._settings
        config = MeasureConfig(
            min_time=settings.min_time, max_time=settings.max_time, warmup_time=settings.warmup_time
        )
        result.software = backend.software()
        baseline = self._run.baseline_for(result.hardware, result.key)
        elsewhere = [
            hw
            for hw, refs in self._run.baselines["refs"].items()
            if result.key in refs and hw != result.hardware
        ]
        expectations = self._marker.matching(
            model=result.model,
            mode=result.mode,
            dtype=result.dtype,
            batch_size=result.batch_size,
            hardware=result.hardware,
        )
        policy = Policy(
            tolerance=settings.tolerance, strict=settings.strict, update=settings.update
        )
        prepared = None
        try:
            prepared = backend.prepare(
                net,
                mode=result.mode,
                batch_size=result.batch_size,
                ctx=ctx,
                dtype=result.dtype,
                **kwargs,
            )
            best: Measurement | None = None
            for _ in range(1 + settings.confirm):
                m = measure(
                    prepared.step,
                    items_per_step=prepared.items_per_step,
                    sync=backend.sync,
                    clock=backend.clock,
                    config=config,
                )
                result.attempts.append(m.items_per_sec)
                if best is None or m.items_per_sec > best.items_per_sec:
                    best = m
                result.measurement = best.as_dict()
                result.measurement["extra"] = dict(prepared.info)
                result.verdict = judge(result, baseline, expectations, policy, elsewhere).as_dict()
                if result.verdict["status"] != REGRESSED and not settings.update:
                    break  # only a suspected regression is worth re-measuring
            problem = prepared.check()
            if problem:
                result.status, result.error = NAN, problem
        except Exception as exc:
            if not backend.is_oom(exc):
                if isinstance(exc, (TypeError, ValueError, FileNotFoundError)):
                    raise
                result.status, result.error = ERROR, f"{type(exc).__name__}: {exc}"
            else:
                result.status, result.measurement = OOM, None
                result.error = str(exc).strip().splitlines()[-1][:300]
        finally:
            del prepared  # free the model and its buffers before the next case
            with contextlib.suppress(Exception):
                backend.sync()  # surface nothing more from a failed case into the next one
        if result.status == ERROR:
            result.measurement = None
        result.verdict = judge(result, baseline, expectations, policy, elsewhere).as_dict()
        return result
