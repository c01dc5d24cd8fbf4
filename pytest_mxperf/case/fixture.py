"""The ``mxperf`` fixture object: the methods a test calls to measure a model (the case path
they share is `pytest_mxperf.case.path.CaseBench`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_mxperf.case import dataparallel, pipelines, sweeps
from pytest_mxperf.case.path import CaseBench, check_positive
from pytest_mxperf.measuring import sweep_search
from pytest_mxperf.measuring.records import CaseResult


class MxPerf(CaseBench):
    """Benchmarks MXNet models inside a test; one object per test, from the ``mxperf`` fixture.

    Each call measures one case and returns its `CaseResult` (``.images_per_sec``, ``.verdict``
    ...). A case that errors (or emits NaN/inf) fails its test at the call, with its message,
    so the code after the call never sees a case without a figure; a regression or a missed
    expectation fails the test after its body has run.
    """

    def inference(self, net: Any, *, batch_size: int, **options: Any) -> CaseResult:
        """Forward passes only (``net(x)``; ``mod.forward(is_train=False)`` for a Symbol).

        :param net: a Gluon (Hybrid)Block, an ``mx.sym.Symbol``, or the prefix of exported
            ``prefix-symbol.json`` / ``prefix-NNNN.params`` files.
        :param options: ``model`` (label of the case), ``name`` (extra key part), ``ctx``,
            ``dtype`` (float32/float16), ``input_shape`` (default ``(3, 224, 224)``).
        """
        first = len(self.results)
        result = self.case(net, "inference", batch_size, **options)
        self.fail_if_errored(first)
        return result

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
        first = len(self.results)
        if data is not None:
            result = pipelines.end_to_end(self, net, data, batch_size, sweep, options)
        elif sweep is not None:
            raise TypeError("training(sweep=...) needs data= (the pipeline to sweep)")
        elif batch_size is None:
            raise TypeError("training() needs batch_size= (or data=, a data source)")
        else:
            result = self.case(net, "training", batch_size, **options)
        self.fail_if_errored(first)
        return result

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
        first = len(self.results)
        result = pipelines.pipeline(
            self, source, batch_size=batch_size, model=model, name=name, sweep=sweep
        )
        self.fail_if_errored(first)
        return result

    def forward_backward(self, net: Any, *, batch_size: int, **options: Any) -> CaseResult:
        """Forward + backward without an optimizer update (same options as `training`)."""
        first = len(self.results)
        result = self.case(net, "forward_backward", batch_size, **options)
        self.fail_if_errored(first)
        return result

    def callable(
        self, fn: Any, *, items_per_call: int, mode: str = "inference", **options: Any
    ) -> CaseResult:
        """Any function that does ``items_per_call`` images of work per call; the device is
        synced at the end of every timed block."""
        check_positive("items_per_call", items_per_call)
        first = len(self.results)
        result = self.case(fn, mode, items_per_call, items_per_call=items_per_call, **options)
        self.fail_if_errored(first)
        return result

    def sweep(
        self,
        net: Any,
        *,
        batch_sizes: Sequence[int] | str = sweep_search.AUTO,
        mode: str = "inference",
        dtypes: Sequence[str] = ("float32",),
        start: int = 1,
        max_batch: int = sweep_search.MAX_BATCH,
        model: str | None = None,
        name: str | None = None,
        ctx: Any = None,
        **options: Any,
    ) -> sweep_search.Sweep:
        """Measure ``net`` at many batch sizes and dtypes; each point is a normal case.

        :param net: what `inference` takes, or a function of no arguments that builds it (called
            for every point: needed for float16, which casts the network in place).
        :param batch_sizes: a list (measured powers of two first), or ``"auto"``: from
            ``start``, doubling until a batch does not fit (out of memory; on CPU, predicted
            over ``--mxperf-memory-budget``) or ``max_batch``, then bisecting.
        :param dtypes: any of float32, float16, amp, bfloat16; one the device cannot run is
            skipped with its reason (the test is skipped when none can run).
        """
        first = len(self.results)
        swept = sweeps.sweep(
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
        self.fail_if_errored(first)
        return swept

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
        scaling: str | None = None,
    ) -> CaseResult:
        """Data-parallel training throughput and its scaling efficiency, weak or strong.

        ``kvstore="dist_sync"`` (``dist_device_sync``, ``dist_async``) launches ``workers``
        worker processes and ``servers`` servers on 127.0.0.1, each worker training on
        ``contexts`` (default one CPU); ``"local"``/``"device"``/``"nccl"`` trains on all of
        ``contexts`` in this process. ``scaling="weak"`` (the default, or the marker's
        ``scaling=``): every worker (device) gets ``batch_size`` images per step, and img/s(1)
        is measured in the same call with the same per-device batch. ``scaling="strong"``:
        ``batch_size`` is the total batch, split over all devices (it must divide evenly), and
        img/s(1) is one worker training the whole of it; the efficiency is the speed-up over N.

        :param net: ``"package.module:function"`` returning a fresh Gluon block (ranks import
            it); a module-level function; or, in process, a Gluon block.
        :returns: a `CaseResult` whose img/s is the aggregate of all workers, with
            ``.scaling`` (per-worker img/s, img/s(1), efficiency, kvstore share, threads).
        """
        first = len(self.results)
        result = dataparallel.data_parallel(
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
            scaling=scaling,
        )
        self.fail_if_errored(first)
        return result
