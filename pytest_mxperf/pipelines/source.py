"""Read a data source: its batches and their images, fetched in a helper thread under a timeout.

A source is anything iterable (an ``mx.io.DataIter``, a ``gluon.data.DataLoader``, a list of
batches); fetching runs in one helper thread so a source that never delivers is stopped by
``--mxperf-pipeline-timeout`` instead of hanging the run.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from pytest_mxperf.measuring.protocol import SpecError


class PipelineError(SpecError):
    """A source that cannot be measured as handed (empty, batches of another size than
    declared, not restartable): a usage error naming what is wrong."""


class PipelineTimeout(RuntimeError):
    """The source delivered no batch within ``--mxperf-pipeline-timeout``."""


# batches ----------------------------------------------------------------------------------------
def batch_arrays(batch: Any) -> list[Any]:
    """The arrays of a batch: an ``mx.io.DataBatch`` (data, then label), a list/tuple (flattened),
    or one array."""
    if hasattr(batch, "data") and isinstance(getattr(batch, "data", None), (list, tuple)):
        return [*batch.data, *(batch.label or [])]
    if isinstance(batch, (list, tuple)):
        return [a for item in batch for a in batch_arrays(item)]
    return [batch]


def batch_images(batch: Any) -> int:
    """Images in a batch: the first dimension of its first array."""
    arrays = batch_arrays(batch)
    shape = getattr(arrays[0], "shape", None) if arrays else None
    if not shape:
        raise PipelineError(
            f"a batch of the source has no array to count images in (got {type(batch).__name__}); "
            "yield arrays, (data, label) tuples or mx.io.DataBatch objects"
        )
    return int(shape[0])


def wait_for(batch: Any) -> None:
    """Wait until the batch's arrays are computed (MXNet is asynchronous)."""
    for arr in batch_arrays(batch):
        wait = getattr(arr, "wait_to_read", None)
        if wait is not None:
            wait()


def declared_batch(source: Any) -> int | None:
    """The batch size a source says it yields (``DataIter.batch_size``, a DataLoader's batch
    sampler), or None."""
    size = getattr(source, "batch_size", None)
    if size is None:
        size = getattr(getattr(source, "_batch_sampler", None), "_batch_size", None)
    return int(size) if isinstance(size, int) and size > 0 else None


def fetches_only_when_asked(source: Any) -> bool:
    """Whether the source does its work only while a batch is asked for: nothing of it runs
    between two fetches, so a paired run's sides may time it block by block in turns
    (`pytest_mxperf.paired.turns`). Known so: a list or tuple of batches, an ``NDArrayIter``,
    and a Gluon ``DataLoader`` without worker processes (``num_workers=0`` decodes each batch
    in the caller's thread when it is asked for). Anything else may have threads or worker
    processes that refill a queue whenever it is not timing (``ImageRecordIter``'s decoding
    threads, a ``DataLoader``'s workers, a user's own prefetcher): such a source is timed in a
    turn of its own."""
    if isinstance(source, (list, tuple)):
        return True
    cls = type(source)
    where = f"{cls.__module__}.{cls.__qualname__}"
    if where == "mxnet.io.io.NDArrayIter":
        return True
    return where == "mxnet.gluon.data.dataloader.DataLoader" and source._num_workers == 0


# fetching ---------------------------------------------------------------------------------------
class _FetchThread:
    """Runs fetches in one daemon thread so a caller can stop waiting; a fetch that times out
    leaves the thread stuck in the source, and the case ends there."""

    def __init__(self) -> None:
        self._requests: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self._results: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="mxperf-fetch", daemon=True)
        self._thread.start()
        self.stuck = False

    def _loop(self) -> None:
        while True:
            fn = self._requests.get()
            if fn is None:
                return
            try:
                self._results.put((True, fn()))
            except BaseException as exc:  # handed back to the caller as it is
                self._results.put((False, exc))

    def call(self, fn: Callable[[], Any], timeout: float) -> Any:
        if self.stuck:
            raise PipelineTimeout("the source is still busy with an earlier batch")
        self._requests.put(fn)
        try:
            ok, value = self._results.get(timeout=timeout)
        except queue.Empty:
            self.stuck = True
            raise PipelineTimeout(
                f"the source delivered no batch within {timeout:g} s (--mxperf-pipeline-timeout)"
            ) from None
        if not ok:
            raise value
        return value

    def close(self) -> None:
        if not self.stuck:
            self._requests.put(None)


class Fetcher:
    """The next batch of a source across epochs: at the end of an epoch the source is reset
    (``reset()`` for a DataIter, a new iterator otherwise) and the time that takes is kept apart,
    so an epoch end is never counted as throughput."""

    def __init__(
        self,
        source: Any,
        *,
        clock: Callable[[], float],
        timeout: float,
        images: int | None = None,
    ) -> None:
        self.source = source
        self.clock = clock
        self.timeout = timeout
        self.images = images
        self.batches = 0
        self.resets = 0
        self.reset_seconds = 0.0
        self._in_epoch = 0
        self._it: Iterator[Any] | None = None
        self._thread = _FetchThread()

    def _next(self) -> Any:
        if self._it is None:
            reset = getattr(self.source, "reset", None)
            if callable(reset):
                # A DataIter is its own iterator: one handed to several measurements (the
                # pipeline alone, then end to end) starts the second where the first stopped,
                # possibly at an epoch's end. Start each at an epoch, as a training loop does.
                reset()
            self._it = iter(self.source)
        try:
            batch = next(self._it)
        except StopIteration:
            if self._in_epoch == 0:
                raise PipelineError("the source is empty: it yielded no batch") from None
            start = self.clock()
            reset = getattr(self.source, "reset", None)
            if callable(reset):
                reset()
            self._it = iter(self.source)
            self.resets += 1
            self._in_epoch = 0
            self.reset_seconds += self.clock() - start
            try:
                batch = next(self._it)
            except StopIteration:
                raise PipelineError(
                    f"the source ended after {self.batches} batch(es) and cannot be restarted "
                    "(a generator or an exhausted iterator): pass a re-iterable source such as "
                    "a DataLoader or a list, or a DataIter with reset()"
                ) from None
        wait_for(batch)
        self._in_epoch += 1
        return batch

    def fetch(self) -> Any:
        """The next batch, waited for; a batch of another size than declared is a usage error."""
        batch = self._thread.call(self._next, self.timeout)
        n = batch_images(batch)
        if self.images is None:
            self.images = n
        elif n != self.images:
            raise PipelineError(
                f"the source yielded a batch of {n} images after batches of {self.images} "
                f"(batch {self.batches + 1}); every batch must have the declared size "
                "(for a DataLoader pass last_batch='discard' or 'rollover')"
            )
        self.batches += 1
        return batch

    def timed_clock(self) -> float:
        """The clock minus the time spent resetting the source at epoch ends."""
        return self.clock() - self.reset_seconds

    def close(self) -> None:
        self._thread.close()


def peek_shape(source: Any, *, clock: Callable[[], float], timeout: float) -> tuple[int, ...]:
    """The shape of the first array of a source's batches (``provide_data`` of a DataIter,
    else one batch fetched from a fresh iterator); a one-pass iterator cannot be peeked."""
    provided = getattr(source, "provide_data", None)
    if provided:
        return tuple(int(d) for d in provided[0].shape)
    if iter(source) is source:
        raise PipelineError(
            "a one-pass iterator (generator) cannot be measured: pass a re-iterable source "
            "(a DataLoader, a list of batches) or a DataIter with reset()"
        )
    fetcher = Fetcher(source, clock=clock, timeout=timeout)
    try:
        arrays = batch_arrays(fetcher.fetch())
    finally:
        fetcher.close()
    return tuple(int(d) for d in arrays[0].shape)
