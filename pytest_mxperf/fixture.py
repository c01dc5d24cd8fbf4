"""The ``mxperf`` fixture object: measure a model, judge it, hand the result to the test."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

import pytest

from pytest_mxperf import diagnosis, fingerprint, locks
from pytest_mxperf import pipeline as pipelines
from pytest_mxperf import sweep as sweeps
from pytest_mxperf.explain import (
    judge,
)
from pytest_mxperf.markers import Expectation, MarkerSpec
from pytest_mxperf.measure import MeasureConfig, Measurement
from pytest_mxperf.protocol import Backend, PrepareSpec
from pytest_mxperf.records import CaseKey, CaseResult, Outcome, Status
from pytest_mxperf.resolution import BaselineRef
from pytest_mxperf.runner import CaseRun, run_case
from pytest_mxperf.session import MxperfSession
from pytest_mxperf.verdict import Policy, decide, suspected

if TYPE_CHECKING:
    pass

FP16_CPU_REASON = sweeps.FP16_CPU_REASON


#: How a case is measured: (spec, config, attempts, again) -> CaseRun; default `run_case`.
Runner = Callable[[PrepareSpec, MeasureConfig, int, Callable[[Measurement], bool]], CaseRun]


def _check_positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


class MxPerf:
    """Benchmarks MXNet models inside a test; one object per test, from the ``mxperf`` fixture.

    Each call measures one case and returns its `CaseResult` (``.images_per_sec``, ``.verdict``
    ...). A regression or a missed expectation fails the test after its body has run.
    """

    def __init__(
        self,
        *,
        item: pytest.Item,
        session: MxperfSession,
        backend: Backend,
        marker: MarkerSpec,
        default_ctx: Any,
    ) -> None:
        self._item = item
        self._session = session
        self._settings = session.settings
        self._run = session.run
        self._backend = backend
        self._marker = marker
        self._default_ctx = default_ctx
        self._seen = session.seen
        self.results: list[CaseResult] = []
        #: Warnings of the case being finished (memory growth, start-up), said once it is kept.
        self._pending_warnings: list[str] = []

    # public API -------------------------------------------------------------------------------
    def inference(self, net: Any, *, batch_size: int, **options: Any) -> CaseResult:
        """Forward passes only (``net(x)``; ``mod.forward(is_train=False)`` for a Symbol).

        :param net: a Gluon (Hybrid)Block, an ``mx.sym.Symbol``, or the prefix of exported
            ``prefix-symbol.json`` / ``prefix-NNNN.params`` files.
        :param options: ``model`` (label of the case), ``name`` (extra key part), ``ctx``,
            ``dtype`` (float32/float16), ``input_shape`` (default ``(3, 224, 224)``).
        """
        return self._case(net, "inference", batch_size, **options)

    def training(
        self,
        net: Any,
        *,
        batch_size: int | None = None,
        data: Any = None,
        sweep: Any = None,
        **options: Any,
    ) -> CaseResult:
        """Forward + backward + optimizer update; also takes ``loss``, ``optimizer``,
        ``optimizer_params``, ``num_classes``, ``task`` and ``labels`` (default: classification,
        softmax cross-entropy on random labels, SGD with learning rate 0.01 and momentum 0.9,
        multi_precision for float16). ``task="segmentation"`` or ``"detection"`` (SSD) make the
        labels and loss of that kind; ``labels=`` (NDArray, tuple, or callable
        ``(batch_size, ctx, dtype)``) gives any others. The loss gets ``(*outputs, *labels)``.

        With ``data=`` (a DataIter, DataLoader or re-iterable of batches; with ``sweep=``, a
        factory taking the swept keyword) it trains on the source's batches, copied to the
        context, and measures the model alone on synthetic data and the pipeline alone too:
        the verdict is ``input-bound`` when end-to-end is below the model alone beyond noise."""
        if data is not None:
            return self._end_to_end(net, data, batch_size, sweep, options)
        if sweep is not None:
            raise TypeError("training(sweep=...) needs data= (the pipeline to sweep)")
        if batch_size is None:
            raise TypeError("training() needs batch_size= (or data=, a data source)")
        return self._case(net, "training", batch_size, **options)

    def pipeline(
        self,
        source: Any,
        *,
        batch_size: int | None = None,
        model: str | None = None,
        name: str | None = None,
        sweep: Any = None,
    ) -> CaseResult:
        """Images/sec of a data source alone (train_imagenet's ``--test-io``): an
        ``mx.io.DataIter``, a ``gluon.data.DataLoader`` or any re-iterable of batches. Images per
        batch come from the first array of a batch (or ``batch_size=``); an epoch end resets the
        source without counting the reset. With ``sweep={"num_workers": [0, 2]}`` (or the
        marker's ``sweep``) ``source`` is a factory called with each value; every point is its
        own case (name ``num_workers=0``) and the fastest point's result is returned."""
        plan = self._sweep(sweep)
        if plan is None:
            return self._pipeline_case(source, batch_size, model, name)
        setting, values = plan
        if not callable(source):
            raise TypeError(f"with sweep=, pass a factory taking {setting}=, not a source")
        results = [
            self._pipeline_case(
                source(**{setting: v}), batch_size, model, pipelines.point_name(setting, v, name)
            )
            for v in values
        ]
        return max(results, key=lambda r: r.images_per_sec or -1.0)

    def _sweep(self, sweep: Any) -> tuple[str, tuple[Any, ...]] | None:
        return pipelines.parse_sweep(sweep) if sweep is not None else self._marker.sweep

    def _peek(self, source: Any) -> tuple[int, ...]:
        clock, timeout = self._backend.clock, self._settings.pipeline_timeout
        return pipelines.peek_shape(source, clock=clock, timeout=timeout)

    def _pipeline_case(
        self, source: Any, batch_size: int | None, model: str | None, name: str | None
    ) -> CaseResult:
        size = batch_size or pipelines.declared_batch(source) or self._peek(source)[0]
        timeout = self._settings.pipeline_timeout

        def runner(spec: PrepareSpec, config: MeasureConfig, attempts: int, again: Any) -> CaseRun:
            return pipelines.run_pipeline(
                self._backend,
                source,
                config,
                timeout=timeout,
                images=size,
                attempts=attempts,
                again=again,
            )

        ctx = self._backend.context("cpu", 0)  # decoding runs on the host
        return self._case(source, "pipeline", size, model=model, name=name, ctx=ctx, runner=runner)

    def _end_to_end(
        self, net: Any, data: Any, batch_size: int | None, sweep: Any, options: dict[str, Any]
    ) -> CaseResult:
        plan = self._sweep(sweep)
        if plan is not None and not callable(data):
            raise TypeError(f"with sweep=, pass data= as a factory taking {plan[0]}=")
        source = data() if plan is not None else data
        shape = self._peek(source)
        if batch_size is not None and batch_size != shape[0]:
            raise pipelines.PipelineError(
                f"batch_size={batch_size} but the source yields batches of {shape[0]}"
            )
        options.setdefault("input_shape", shape[1:])
        model, name = options.pop("model", None), options.pop("name", None) or "e2e"
        points: list[tuple[str, float | None]] = []
        for value in plan[1] if plan is not None else ():
            point = pipelines.point_name(plan[0], value)  # type: ignore[index]
            swept = self._pipeline_case(data(**{plan[0]: value}), shape[0], model, point)  # type: ignore[index]
            points.append((point, swept.images_per_sec))
        timeout = self._settings.pipeline_timeout

        def runner(spec: PrepareSpec, config: MeasureConfig, attempts: int, again: Any) -> CaseRun:
            return pipelines.run_end_to_end(
                self._backend,
                net,
                source,
                spec,
                config,
                timeout=timeout,
                attempts=attempts,
                again=again,
            )

        def after(result: CaseResult) -> None:
            m, verdict = result.measurement, result.verdict
            if m is None or verdict is None or "model_alone" not in m.extra:
                return
            pipe = m.extra.get("pipeline_alone")
            bound = pipelines.decide_input_bound(
                m,
                pipelines.Figure(**m.extra["model_alone"]),
                None if pipe is None else pipelines.Figure(**pipe),
            )
            if bound is not None:
                text = pipelines.explain_input_bound(str(result.key), bound, points)
                result.verdict = pipelines.input_bound_verdict(verdict, text)

        return self._case(
            net,
            "training",
            shape[0],
            model=model,
            name=name,
            runner=runner,
            after=after,
            **options,
        )

    def forward_backward(self, net: Any, *, batch_size: int, **options: Any) -> CaseResult:
        """Forward + backward without an optimizer update (same options as `training`)."""
        return self._case(net, "forward_backward", batch_size, **options)

    def callable(
        self, fn: Any, *, items_per_call: int, mode: str = "inference", **options: Any
    ) -> CaseResult:
        """Any function that does ``items_per_call`` images of work per call; the device is
        synced at the end of every timed block."""
        _check_positive("items_per_call", items_per_call)
        return self._case(fn, mode, items_per_call, items_per_call=items_per_call, **options)

    def sweep(
        self,
        net: Any,
        *,
        batch_sizes: Sequence[int] | str = sweeps.AUTO,
        mode: str = "inference",
        dtypes: Sequence[str] = ("float32",),
        start: int = 1,
        max_batch: int = sweeps.MAX_BATCH,
        model: str | None = None,
        name: str | None = None,
        ctx: Any = None,
        **options: Any,
    ) -> sweeps.Sweep:
        """Measure ``net`` at many batch sizes and dtypes; each point is a normal case.

        :param net: what `inference` takes, or a function of no arguments that builds it (called
            for every point: needed for float16, which casts the network in place).
        :param batch_sizes: a list (measured powers of two first), or ``"auto"``: from
            ``start``, doubling until a batch does not fit (out of memory; on CPU, predicted
            over ``--mxperf-memory-budget``) or ``max_batch``, then bisecting.
        :param dtypes: any of float32, float16, amp, bfloat16; one the device cannot run is
            skipped with its reason (the test is skipped when none can run).
        """
        from pytest_mxperf import fixture_sweep

        return fixture_sweep.sweep(
            self,
            net,
            batch_sizes=batch_sizes,
            mode=mode,
            dtypes=dtypes,
            start=start,
            max_batch=max_batch,
            model=model,
            name=name,
            ctx=ctx,
            **options,
        )

    def data_parallel(
        self,
        net: Any,
        /,
        *,
        batch_size: int,
        input_shape: Sequence[int] = (3, 224, 224),
        kvstore: str = "dist_sync",
        workers: int = 2,
        servers: int = 1,
        contexts: Sequence[Any] | None = None,
        model: str | None = None,
        name: str | None = None,
        num_classes: int | None = None,
        optimizer: str = "sgd",
        learning_rate: float = 0.01,
        step_hook: str | None = None,
        threads_per_worker: int | None = None,
    ) -> CaseResult:
        """Data-parallel training throughput and its weak-scaling efficiency.

        ``kvstore="dist_sync"`` (``dist_device_sync``, ``dist_async``) launches ``workers``
        worker processes and ``servers`` servers on 127.0.0.1, each worker training on
        ``contexts`` (default one CPU); ``"local"``/``"device"``/``"nccl"`` trains on all of
        ``contexts`` in this process. Every worker (device) gets ``batch_size`` images per step.
        img/s(1) is measured in the same call with the same per-device batch.

        :param net: ``"package.module:function"`` returning a fresh Gluon block (ranks import
            it); a module-level function; or, in process, a Gluon block.
        :returns: a `CaseResult` whose img/s is the aggregate of all workers, with
            ``.scaling`` (per-worker img/s, img/s(1), efficiency, kvstore share, threads).
        """
        from pytest_mxperf import fixture_dp

        return fixture_dp.data_parallel(
            self,
            net,
            batch_size=batch_size,
            input_shape=input_shape,
            kvstore=kvstore,
            workers=workers,
            servers=servers,
            contexts=contexts,
            model=model,
            name=name,
            num_classes=num_classes,
            optimizer=optimizer,
            learning_rate=learning_rate,
            step_hook=step_hook,
            threads_per_worker=threads_per_worker,
        )

    def _unsupported(self, dtype: str, kind: str, mode: str) -> str | None:
        if dtype in ("float32", "float16") and kind == "gpu":
            return None  # nothing to ask the back end
        features = str(self._backend.software().get("mxnet_features", ""))
        return sweeps.unsupported_dtype(
            dtype, kind, mode, flags=sweeps.cpu_flags(), features=features
        )

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
        runner: Runner | None = None,
        after: Callable[[CaseResult], None] | None = None,
        **options: Any,
    ) -> CaseResult:
        _check_positive("batch_size", batch_size)
        backend = self._backend
        ctx = self._default_ctx if ctx is None else ctx
        spec = PrepareSpec.from_options(
            mode=mode, batch_size=batch_size, ctx=ctx, dtype=dtype, options=options
        )
        kind, index = backend.describe(ctx)
        why_not = self._unsupported(dtype, kind, mode)
        if why_not:
            pytest.skip(why_not)
        key = CaseKey(self._label(model), mode, dtype, batch_size, kind, name)
        self._claim(key)
        result = CaseResult(
            key=key,
            device=f"{kind}({index})",
            hardware=self._run.hardware_for(kind, index),
            threads=fingerprint.threads_in_force(os.environ),
            environment=fingerprint.perf_environment(os.environ),
            nodeid=self._item.nodeid,
            worker=os.environ.get("PYTEST_XDIST_WORKER"),
        )
        if self._settings.ab:
            # Paired mode: the side processes measured this case; judge the pair.
            self._judge_pair(result)
            self._finish_pair(result)
            if after is not None:
                after(result)
            self.results.append(result)
            self._warn_pending(result)
            return result
        with self.device_lock(result.key, kind, index):
            start = time.time()
            ref = self._measure(result, net, spec, runner)
            result.window = [start, time.time()]
        why_no_base: str | None = None
        if result.verdict is not None and suspected(result.verdict, self._settings.tolerance):
            why_no_base = self._arbitrate(result, ref)  # outside the lock: sides take it
        self._finish(result, ref, why_no_base)
        if after is not None:
            after(result)
        self.results.append(result)
        self._warn_pending(result)
        return result

    def _warn_pending(self, result: CaseResult) -> None:
        pending, self._pending_warnings = self._pending_warnings, []
        for text in pending:
            warnings.warn(f"mxperf: {result.key}: {text}", pytest.PytestWarning, stacklevel=4)

    def device_lock(
        self, key: CaseKey, kind: str, index: int
    ) -> contextlib.AbstractContextManager[None]:
        """This device's machine-wide lock; a case that has to wait for another run says so."""
        device = self._run.device_lock_name(kind, index)

        def waiting(holder: str) -> None:
            self.tell(
                f"mxperf: {key}: waiting for the {device} lock: another pytest --mxperf run on "
                f"this machine is measuring ({holder}); runs take turns"
            )

        return locks.device_lock(self._run.lock_dir, device, on_wait=waiting)

    def tell(self, text: str) -> None:
        """One line on the terminal now, whatever the capture and verbosity (stderr in an
        xdist worker, whose terminal output the controller does not show)."""
        config = self._item.config
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or capture is None or os.environ.get("PYTEST_XDIST_WORKER"):
            print(text, file=sys.__stderr__, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.ensure_newline()
            reporter.write_line(text, yellow=True)

    def _claim(self, key: CaseKey) -> None:
        """Two cases with one key in one run are an error."""
        text = str(key)
        if text in self._seen:
            pytest.fail(
                f"mxperf: case key {text!r} is measured twice in this run (first by "
                f"{self._seen[text]}); pass name= to tell the cases apart",
                pytrace=False,
            )
        self._seen[text] = self._item.nodeid

    def _reference(self, result: CaseResult) -> tuple[BaselineRef | None, list[Expectation]]:
        """Record the software, then the case's stored baseline and the marker expectations
        that apply to it on this hardware."""
        result.software = self._backend.software()
        ref = self._run.baseline_for(result.hardware, str(result.key))
        expectations = self._marker.matching(
            model=result.model,
            mode=result.mode,
            dtype=result.dtype,
            batch_size=result.batch_size,
            hardware=result.hardware,
        )
        return ref, expectations

    def _measure(
        self, result: CaseResult, net: Any, spec: PrepareSpec, runner: Runner | None = None
    ) -> BaselineRef | None:
        settings, run = self._settings, self._run
        ref, expectations = self._reference(result)
        why_not = None if ref is None else self._session.why_no_pair(ref.commit.get("sha"))
        # Without a paired run to confirm it, a drop must clear the floor sized for noisy
        # shared runners; with one, the lower floor lets a quiet machine catch small losses.
        tolerance = settings.tolerance
        if why_not is not None:
            tolerance = max(tolerance, settings.unconfirmed_tolerance)
        policy = self._policy(tolerance)

        def again(best: Measurement) -> bool:
            # Update mode always takes every attempt (the baseline is a best-of-N); otherwise
            # only a suspected regression is worth re-measuring.
            if settings.update:
                return True
            result.measurement = best
            return decide(result, ref, expectations, policy).outcome == Outcome.REGRESSED

        config = MeasureConfig(
            min_time=settings.min_time, max_time=settings.max_time, warmup_time=settings.warmup_time
        )

        def suspect(best: Measurement) -> bool:
            # Profile a case judged regressed (or, on a paired run's first round, every case):
            # after its timed blocks, with the step still warm.
            if settings.side_out:
                return settings.side_profile
            if settings.update:
                return False
            result.measurement = best
            return decide(result, ref, expectations, policy).outcome == Outcome.REGRESSED

        diagnose = diagnosis.DiagnoseSpec(
            trace_path=diagnosis.trace_path_for(settings.profile, str(result.key)),
            profile_if=suspect,
        )
        attempts = 1 + settings.confirm
        if runner is not None:
            outcome = runner(spec, config, attempts, again)
        else:
            outcome = run_case(
                self._backend,
                net,
                spec,
                config,
                attempts=attempts,
                again=again,
                diagnose=diagnose,
            )
        diagnosis.apply(result, outcome.diagnosis)
        result.status, result.measurement = outcome.status, outcome.measurement
        result.attempts, result.error = outcome.attempts, outcome.error
        result.warnings = outcome.warnings
        result.macs_per_image = outcome.macs_per_image
        if outcome.macs_per_image and result.status == Status.OK:
            # Still inside the device lock: the probe never runs beside another benchmark.
            device = self._backend.describe(spec.ctx)
            result.peak_gflops = self._session.peak_gflops(
                self._backend, spec.ctx, device, result.dtype
            )
        for text in outcome.warnings:
            warnings.warn(f"mxperf: {result.key}: {text}", pytest.PytestWarning, stacklevel=4)
        elsewhere = run.baselines.elsewhere(result.hardware, str(result.key))
        result.verdict = judge(result, ref, expectations, policy, elsewhere)
        if why_not is not None and result.verdict.outcome == Outcome.REGRESSED:
            note = f"\nnot confirmed by a paired run ({why_not}): judged against the stored figure"
            if self._other_machine(ref):
                note += " (the baseline was measured on another machine)"
            result.verdict = result.verdict.explained(result.verdict.message + note)
        return ref

    def _policy(self, tolerance: float) -> Policy:
        s = self._settings
        return Policy(
            tolerance=tolerance,
            strict=s.strict,
            update=s.update,
            floor_tolerance=s.unconfirmed_tolerance,
        )

    def _arbitrate(self, result: CaseResult, ref: BaselineRef | None) -> str | None:
        from pytest_mxperf import fixture_pair

        return fixture_pair.arbitrate(self, result, ref)

    def _finish(self, result: CaseResult, ref: BaselineRef | None, why_no_base: str | None) -> None:
        from pytest_mxperf import fixture_pair

        fixture_pair.finish_stored(self, result, ref, why_no_base)

    def _finish_pair(self, result: CaseResult) -> None:
        from pytest_mxperf import fixture_pair

        fixture_pair.finish_paired(self, result)

    def _judge_pair(self, result: CaseResult) -> None:
        from pytest_mxperf import fixture_pair

        fixture_pair.judge_pair(self, result)

    def _other_machine(self, ref: BaselineRef | None) -> bool:
        from pytest_mxperf import fixture_pair

        return fixture_pair.other_machine(self, ref)
