"""The ``mxperf`` fixture object: measure a model, judge it, hand the result to the test."""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mxperf import fingerprint, locks, pairing
from pytest_mxperf import sweep as sweeps
from pytest_mxperf.explain import (
    explain_arbitrated,
    explain_paired,
    judge,
    judge_scaling,
    what_changed,
)
from pytest_mxperf.markers import MarkerSpec
from pytest_mxperf.measure import MeasureConfig, Measurement
from pytest_mxperf.protocol import Backend, PrepareSpec
from pytest_mxperf.records import CaseKey, CaseResult, Outcome, Scaling, Status, Verdict
from pytest_mxperf.resolution import BaselineRef
from pytest_mxperf.runner import run_case
from pytest_mxperf.session import MxperfSession
from pytest_mxperf.verdict import Policy, decide, decide_arbitrated, decide_paired, suspected

if TYPE_CHECKING:
    from pytest_mxperf.dataparallel import DataParallelSpec

FP16_CPU_REASON = sweeps.FP16_CPU_REASON


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
        ``optimizer_params``, ``num_classes``, ``task`` and ``labels`` (default: classification,
        softmax cross-entropy on random labels, SGD with learning rate 0.01 and momentum 0.9,
        multi_precision for float16). ``task="segmentation"`` or ``"detection"`` (SSD) make the
        labels and loss of that kind; ``labels=`` (NDArray, tuple, or callable
        ``(batch_size, ctx, dtype)``) gives any others. The loss gets ``(*outputs, *labels)``."""
        return self._case(net, "training", batch_size, **options)

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
        plan = sweeps.make_plan(batch_sizes, start, max_batch)
        ctx = self._default_ctx if ctx is None else ctx
        kind, _ = self._backend.describe(ctx)
        label = self._label(model)
        build = net if callable(net) and not _is_model(net) else _constant(net)
        out = sweeps.Sweep(label, mode, kind)
        deadline = time.monotonic() + self._settings.sweep_time
        for dtype in dtypes:
            why_not = self._unsupported(dtype, kind, mode)
            if why_not:
                out.curves[dtype] = sweeps.Curve(dtype, skipped=why_not)
                continue
            first = len(self.results)
            budget = self._memory_budget() if kind == "cpu" else None

            def point(batch: int, dtype: str = dtype) -> sweeps.Point:
                return self._point(
                    build, mode, batch, model=label, name=name, ctx=ctx, dtype=dtype, **options
                )

            out.curves[dtype] = curve = sweeps.run_curve(
                dtype,
                plan,
                point,
                budget=budget,
                time_left=lambda: time.monotonic() < deadline,
            )
            self._close_curve(curve, self.results[first:], out)
        skipped = {d: c.skipped for d, c in out.curves.items() if c.skipped}
        for r in out.results:
            r.sweep = {**(r.sweep or {}), "skipped": skipped}
        if all(c.skipped for c in out.curves.values()):
            pytest.skip("; ".join(str(c.skipped) for c in out.curves.values()))
        for line in out.lines():
            if "not measured" in line or "dropped" in line:
                warnings.warn(f"mxperf: sweep {label}: {line}", pytest.PytestWarning, stacklevel=2)
        return out

    def _unsupported(self, dtype: str, kind: str, mode: str) -> str | None:
        if dtype in ("float32", "float16") and kind == "gpu":
            return None  # nothing to ask the back end
        features = str(self._backend.software().get("mxnet_features", ""))
        return sweeps.unsupported_dtype(
            dtype, kind, mode, flags=sweeps.cpu_flags(), features=features
        )

    def _memory_budget(self) -> sweeps.MemoryBudget | None:
        start = sweeps.read_status().get("VmRSS")
        budget = self._settings.memory_budget
        if budget is None:
            available = sweeps.available_memory()
            if available is None or start is None:
                return None
            budget = start + available // 2
        return sweeps.MemoryBudget(budget, start=start)

    def _point(self, build: Any, mode: str, batch: int, **kwargs: Any) -> sweeps.Point:
        meter = sweeps.PeakMeter()
        with meter.measuring():
            r = self._case(build(), mode, batch, **kwargs)
        point = sweeps.Point(batch, r.status.value, r.images_per_sec, r.rel_iqr, meter.peak)
        if r.status == Status.OOM:
            # Free what the failed allocation left (run_case dropped the model), then say how
            # much the process still holds: MXNet's pool and the allocator may keep it.
            gc.collect()
            self._backend.sync()
            now = sweeps.read_status().get("VmRSS")
            kept = None if now is None or meter.before is None else now - meter.before
            point.note = r.error or "out of memory"
            if kept is not None and kept > sweeps.RETAINED_REPORT:
                point.note += (
                    f"; after freeing it the process still holds {sweeps.mib(kept)} more than "
                    "before (MXNet's memory pool or the allocator keeps it)"
                )
        return point

    def _close_curve(
        self, curve: sweeps.Curve, results: list[CaseResult], out: sweeps.Sweep
    ) -> None:
        summary = curve.summary()
        for r in results:
            r.sweep = summary
            ref = self._run.baseline_for(r.hardware, str(r.key))
            drop = (
                None
                if ref is None
                else sweeps.largest_fit_drop(curve.largest_fit, ref.case.record.get("sweep"))
            )
            if drop and drop not in curve.notes:
                curve.notes.append(drop)
        out.results += results
        curve.notes += [f"batch {p.batch_size}: {p.note}" for p in curve.points if p.note]

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
        from pytest_mxperf.dataparallel import DataParallelSpec, context_name, object_ref

        _check_positive("batch_size", batch_size)
        in_process = not kvstore.startswith("dist")
        names = [context_name(c) for c in contexts or ()]
        if not names and not in_process:
            kind0, _ = self._backend.describe(self._default_ctx)
            names = ["gpu(0)" if kind0 == "gpu" else "cpu(0)"]
        block = None
        if isinstance(net, str):
            factory = net
        elif not in_process:
            factory = object_ref(net)  # ranks import it: a module-level function
        else:
            # One process needs no import: a block, or what a factory function returns.
            block = net() if inspect.isfunction(net) else net
            factory = f"{type(block).__module__}:{type(block).__qualname__}"
        settings = self._settings
        spec = DataParallelSpec(
            factory=factory,
            batch_per_device=batch_size,
            input_shape=tuple(input_shape),
            kvstore=kvstore,
            workers=workers,
            servers=servers,
            contexts=tuple(names),
            num_classes=num_classes,
            optimizer=optimizer,
            learning_rate=learning_rate,
            step_hook=step_hook,
            threads_per_worker=threads_per_worker,
            timeout=settings.dist_timeout,
            measure=MeasureConfig(
                min_time=settings.min_time,
                max_time=settings.max_time,
                warmup_time=settings.warmup_time,
            ),
        )
        kinds = {parse_ctx_kind(c) for c in spec.worker_contexts}
        if len(kinds) != 1:
            raise ValueError(f"contexts mix device kinds: {', '.join(spec.worker_contexts)}")
        (kind,) = kinds
        n = spec.world_size
        gpus = n * len(spec.worker_contexts) if spec.distributed else n
        key = CaseKey(
            self._label(model),
            "training",
            "float32",
            batch_size,
            kind,
            kvstore if name is None else f"{kvstore}-{name}",
            world_size=n,
        )
        self._claim(key)
        first = spec.worker_contexts[0]
        device = f"{n}x {first}" if spec.distributed else f"{kind}({_indices(spec.contexts)})"
        run = self._run
        if kind == "gpu":
            gpu_name = run.gpus[0]["name"] if run.gpus else None
            hardware = fingerprint.hardware_key(
                "gpu", machine=run.machine, cpu=run.cpu_key, gpu_name=gpu_name, gpu_count=gpus
            )
        else:
            hardware = run.hardware_for("cpu", 0)
        result = CaseResult(
            key=key,
            device=device,
            hardware=hardware,
            threads=fingerprint.threads_in_force(os.environ),
            environment=fingerprint.perf_environment(os.environ),
            nodeid=self._item.nodeid,
            worker=os.environ.get("PYTEST_XDIST_WORKER"),
        )
        if settings.ab:
            self._judge_pair(result)
            self.results.append(result)
            return result
        locks_held = ["cpu"] if kind == "cpu" else [f"gpu{i}" for i in range(gpus)]
        with contextlib.ExitStack() as stack:
            for lock in locks_held:
                index = 0 if lock == "cpu" else int(lock[3:])
                stack.enter_context(
                    locks.device_lock(run.lock_dir, run.device_lock_name(kind, index))
                )
            start = time.time()
            ref = self._measure_data_parallel(result, block, spec)
            result.window = [start, time.time()]
        if result.verdict is not None and suspected(result.verdict, self._settings.tolerance):
            self._arbitrate(result, ref)
        self.results.append(result)
        return result

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

    def _measure_data_parallel(
        self, result: CaseResult, block: Any, spec: DataParallelSpec
    ) -> BaselineRef | None:
        """Measure (again while it looks regressed, up to ``--mxperf-confirm`` times), then
        judge the aggregate img/s and the scaling efficiency."""
        from pytest_mxperf.dataparallel import DataParallelError

        settings, run = self._settings, self._run
        result.software = self._backend.software()
        ref = run.baseline_for(result.hardware, str(result.key))
        expectations = self._marker.matching(
            model=result.model,
            mode=result.mode,
            dtype=result.dtype,
            batch_size=result.batch_size,
            hardware=result.hardware,
        )
        n = spec.world_size
        floor = self._marker.efficiency_floor(
            model=result.model, world_size=n, hardware=result.hardware
        )
        why_not = None if ref is None else self._session.why_no_pair(ref.commit.get("sha"))
        tolerance = settings.tolerance
        if why_not is not None:
            tolerance = max(tolerance, settings.unconfirmed_tolerance)
        policy = self._policy(tolerance)
        elsewhere = run.baselines.elsewhere(result.hardware, str(result.key))
        # Each attempt is two launches; update mode stores the first (no best-of-N here).
        attempts = 1 if settings.update else 1 + settings.confirm
        tried: list[tuple[Measurement, Scaling]] = []
        for _ in range(attempts):
            try:
                measured = self._backend.data_parallel(block, spec)
            except DataParallelError as exc:
                result.status, result.error = Status.ERROR, str(exc)
                break
            except Exception as exc:
                if self._backend.is_oom(exc):
                    result.status = Status.OOM
                    result.error = str(exc).strip().splitlines()[-1][:300]
                else:
                    result.status, result.error = Status.ERROR, f"{type(exc).__name__}: {exc}"
                break
            tried.append((measured.aggregate_measurement(), measured.scaling()))
            result.measurement, result.scaling = tried[-1]
            result.attempts = [m.items_per_sec for m, _ in tried]
            verdict = judge_scaling(result, ref, expectations, floor, policy, elsewhere)
            if verdict.outcome != Outcome.REGRESSED:
                break
        if tried and result.status == Status.OK:
            best = max(tried, key=lambda t: t[1].efficiency)
            result.measurement, result.scaling = best
            threads = best[1].threads_per_worker
            if threads is not None:
                result.threads = {
                    **result.threads,
                    "omp_threads": threads,
                    "source": f"per rank ({n} ranks)",
                }
        elif not tried:
            result.measurement = result.scaling = None
        result.verdict = judge_scaling(result, ref, expectations, floor, policy, elsewhere)
        if why_not is not None and result.verdict.outcome == Outcome.REGRESSED:
            note = f"\nnot confirmed by a paired run ({why_not}): judged against the stored figure"
            result.verdict = result.verdict.explained(result.verdict.message + note)
        return ref

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
        text = str(key)
        if text in self._seen:
            pytest.fail(
                f"mxperf: case key {text!r} is measured twice in this run (first by "
                f"{self._seen[text]}); pass name= to tell the cases apart",
                pytrace=False,
            )
        self._seen[text] = self._item.nodeid
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
            self.results.append(result)
            return result
        with locks.device_lock(self._run.lock_dir, self._run.device_lock_name(kind, index)):
            start = time.time()
            ref = self._measure(result, net, spec)
            result.window = [start, time.time()]
        if result.verdict is not None and suspected(result.verdict, self._settings.tolerance):
            self._arbitrate(result, ref)  # outside the lock: the sides take it themselves
        self.results.append(result)
        return result

    def _measure(self, result: CaseResult, net: Any, spec: PrepareSpec) -> BaselineRef | None:
        settings, run = self._settings, self._run
        result.software = self._backend.software()
        ref = run.baseline_for(result.hardware, str(result.key))
        expectations = self._marker.matching(
            model=result.model,
            mode=result.mode,
            dtype=result.dtype,
            batch_size=result.batch_size,
            hardware=result.hardware,
        )
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
        outcome = run_case(
            self._backend, net, spec, config, attempts=1 + settings.confirm, again=again
        )
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

    def _arbitrate(self, result: CaseResult, ref: BaselineRef | None) -> None:
        """Measure the baseline commit's code paired with HEAD for a suspected stored-baseline
        regression (a stored figure from another host is no evidence, and block noise can
        hide a real loss from the stored threshold)."""
        assert result.verdict is not None
        sha = None if ref is None else ref.commit.get("sha")
        if ref is None or not sha or self._session.why_no_pair(sha) is not None:
            return
        data = self._session.pairer.run(str(sha)[:10], str(sha), [self._item.nodeid], _quiet)
        key = str(result.key)
        estimate = data.estimate(key, self._settings.min_effect)
        pair = None if estimate is None else decide_paired(estimate, self._policy(0.0))
        changed = what_changed(result, ref)
        verdict = decide_arbitrated(result.verdict, pair, bool(changed), self._settings.update)
        other = self._other_machine(ref)
        why = "; ".join(data.side_failures(pairing.REV) + data.side_failures(pairing.HEAD))
        message = explain_arbitrated(
            result.verdict.message,
            verdict,
            estimate,
            str(sha)[:10],
            ", ".join(pairing.describe_round(p) for p in data.pairs(key)),
            changed,
            other,
            why_not=why or None,
        )
        result.verdict = verdict.explained(message)

    def _other_machine(self, ref: BaselineRef | None) -> bool:
        """Whether the baseline's runs were all stored by other machines (anonymous ids)."""
        ours, ids = self._run.machine_id, () if ref is None else ref.case.machine_ids
        return bool(ours) and any(ids) and ours not in ids

    def _judge_pair(self, result: CaseResult) -> None:
        data = self._session.paired
        assert data is not None, "paired rounds run before the tests"
        key, s = str(result.key), self._settings
        pairs = data.pairs(key)
        heads = [b for _, b in pairs] or [
            r[pairing.HEAD].cases[key] for r in data.rounds if key in r[pairing.HEAD].cases
        ]
        if not heads:
            failures = data.side_failures(pairing.HEAD, self._item.nodeid)
            result.status = Status.ERROR
            result.error = "HEAD's side did not measure it: " + ("; ".join(failures) or "?")
            result.verdict = Verdict(Outcome.ERROR, True, f"{key}: {result.error}"[:1500])
            return
        ranked = sorted(heads, key=lambda r: r.images_per_sec or 0.0)
        middle = ranked[len(ranked) // 2]
        result.status, result.measurement, result.error = (
            middle.status,
            middle.measurement,
            middle.error,
        )
        result.software, result.threads = middle.software, middle.threads
        result.scaling = middle.scaling
        result.macs_per_image, result.peak_gflops = middle.macs_per_image, middle.peak_gflops
        result.attempts = [h.images_per_sec or 0.0 for h in heads]
        estimate = data.estimate(key, s.min_effect)
        verdict = decide_paired(estimate, self._policy(0.0))
        revs = sorted(a.images_per_sec or 0.0 for a, _ in pairs)
        if revs:
            verdict = replace(
                verdict, baseline_images_per_sec=revs[len(revs) // 2], baseline_commit=data.rev_sha
            )
        failures = [] if pairs else data.side_failures(pairing.REV, self._item.nodeid)
        message = explain_paired(
            result,
            verdict,
            estimate,
            data.rev_label,
            ", ".join(pairing.describe_round(p) for p in pairs),
            s.min_effect,
            failures,
        )
        result.verdict = verdict.explained(message)


def _constant(net: Any) -> Any:
    def same() -> Any:
        return net

    return same


def _is_model(net: Any) -> bool:
    """A Gluon Block, a Symbol or an exported model's path (used as it is for every point),
    as opposed to a function that builds one."""
    return (
        hasattr(net, "collect_params")
        or hasattr(net, "list_arguments")
        or isinstance(net, (str, os.PathLike))
    )


def parse_ctx_kind(text: str) -> str:
    from pytest_mxperf.dataparallel import parse_context

    return parse_context(text)[0]


def _indices(contexts: Sequence[str]) -> str:
    from pytest_mxperf.dataparallel import parse_context

    return ",".join(str(parse_context(c)[1]) for c in contexts)


def _quiet(_: str) -> None:
    """Arbitration happens inside a test: no progress lines between pytest's own."""
