"""Data-source measuring on a virtual clock, and the input-bound verdict (no MXNet)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from pytest_mxperf.config import parsers
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.markers import MarkerError, parse_marker
from pytest_mxperf.measuring.measure import MeasureConfig, for_side
from pytest_mxperf.measuring.records import Outcome, Status
from pytest_mxperf.measuring.verdicts import Finding
from pytest_mxperf.pipelines import input_bound, timing
from pytest_mxperf.pipelines import source as pipeline_source
from pytest_mxperf.testing import FakeBackend, measurement_of

CONFIG = MeasureConfig(min_time=0.5, max_time=2.0, warmup_time=1.0)


class Source:
    """A re-iterable source of ``batches`` per epoch; each batch advances the fake clock by
    ``seconds`` and each new epoch by ``reset_seconds``; ``raise_at`` raises at that batch."""

    def __init__(
        self,
        backend: FakeBackend,
        *,
        batch: int = 8,
        batches: int = 5,
        seconds: float = 0.01,
        reset_seconds: float = 0.0,
        sizes: dict[int, int] | None = None,
        raise_at: int | None = None,
        block: threading.Event | None = None,
    ) -> None:
        self.backend, self.batch, self.batches = backend, batch, batches
        self.seconds, self.reset_seconds = seconds, reset_seconds
        self.sizes, self.raise_at, self.block = sizes or {}, raise_at, block
        self.served = 0

    def __iter__(self) -> Iterator[Any]:
        self.backend.now += self.reset_seconds  # eagerly, as a DataLoader starts its workers
        return self._batches()

    def _batches(self) -> Iterator[Any]:
        for _ in range(self.batches):
            if self.block is not None:
                self.block.wait()
            if self.raise_at is not None and self.served == self.raise_at:
                raise OSError("corrupt record at offset 4096")
            self.backend.now += self.seconds
            n = self.sizes.get(self.served, self.batch)
            self.served += 1
            yield (np.zeros((n, 3, 4, 4)), np.zeros(n))


def run(source: Any, backend: FakeBackend, **kw: Any) -> Any:
    return timing.run_pipeline(backend, source, kw.pop("config", CONFIG), timeout=5.0, **kw)


def test_images_per_second_and_epoch_resets_not_counted() -> None:
    backend = FakeBackend()
    # A slow reset (1 s per epoch of 5 batches) would halve the figure if it were counted.
    src = Source(backend, batch=8, batches=5, seconds=0.01, reset_seconds=1.0)
    result = run(src, backend)
    assert result.status == Status.OK
    m = result.measurement
    # Every block spans epoch ends, yet every block is exact: no reset time was counted.
    assert m.block_rates == pytest.approx([800.0] * len(m.block_rates))
    assert m.extra["epoch_resets"] > 3
    assert m.extra["reset_seconds"] == pytest.approx(m.extra["epoch_resets"] * 1.0)


def test_a_paired_side_times_a_source_alone_in_blocks_half_a_plain_runs() -> None:
    """A plain run's source blocks last 0.5 s at least, and so do a paired side's of a source
    timed block by block in turns (its block pairs are its evidence); a side's turn of its own
    times 0.25 s blocks (`measure.SIDE_SOURCE_BLOCK_TIME`): such a pipeline's rounds differ by
    its fresh instances, not by its blocks' length. A model's blocks in a side stay 0.1 s."""

    def measured(config: MeasureConfig) -> Any:
        backend = FakeBackend()
        return run(Source(backend, batches=50), backend, config=config).measurement

    plain, in_turns, alone = (
        measured(CONFIG),
        measured(for_side(CONFIG)),
        measured(for_side(CONFIG, alone=True)),
    )
    # 0.01 s a batch: 50 batches a plain block and a side's in turns, 25 a turn of its own's.
    steps = (plain.steps_per_block, in_turns.steps_per_block, alone.steps_per_block)
    assert steps == (50, 50, 25)
    assert sum(alone.block_seconds) < sum(plain.block_seconds)
    assert for_side(CONFIG, alone=True).block_time == for_side(CONFIG).block_time == 0.1


def test_batch_size_from_first_array_and_the_declared_one() -> None:
    assert pipeline_source.batch_images((np.zeros((6, 3)), np.zeros(6))) == 6
    assert pipeline_source.batch_images(np.zeros((4, 2))) == 4

    class Iter:
        batch_size = 32

    assert pipeline_source.declared_batch(Iter()) == 32
    assert pipeline_source.declared_batch([1, 2]) is None


def test_a_source_that_raises_mid_epoch_is_an_error_with_its_message() -> None:
    backend = FakeBackend()
    result = run(Source(backend, batches=50, raise_at=30), backend)
    assert result.status == Status.ERROR
    assert result.error == "OSError: corrupt record at offset 4096"


def test_an_empty_source_is_a_usage_error() -> None:
    with pytest.raises(pipeline_source.PipelineError, match="empty"):
        run([], FakeBackend())


def test_a_batch_of_another_size_is_a_usage_error() -> None:
    backend = FakeBackend()
    src = Source(backend, batch=8, batches=5, sizes={3: 5})
    with pytest.raises(pipeline_source.PipelineError, match="batch of 5 images after batches of 8"):
        run(src, backend)
    with pytest.raises(
        pipeline_source.PipelineError, match="batch of 8 images after batches of 16"
    ):
        run(Source(backend, batch=8), backend, images=16)


class OneEpochIter:
    """Like an ``mx.io.DataIter``: its own iterator, exhausted at an epoch's end until reset."""

    def __init__(self, backend: FakeBackend, batches: int = 4) -> None:
        self.backend, self.batches, self.left = backend, batches, batches

    def reset(self) -> None:
        self.left = self.batches

    def __iter__(self) -> OneEpochIter:
        return self

    def __next__(self) -> Any:
        if self.left == 0:
            raise StopIteration
        self.left -= 1
        self.backend.now += 0.01
        return (np.zeros((8, 3, 4, 4)), np.zeros(8))


def test_a_data_iter_left_at_an_epoch_end_starts_a_new_epoch() -> None:
    # The pipeline-alone figure and the end-to-end run share one DataIter: the second run
    # must not find it exhausted and call the source empty.
    backend = FakeBackend()
    it = OneEpochIter(backend)
    for _ in it:
        pass
    result = run(it, backend)
    assert result.status == Status.OK
    assert result.measurement is not None and result.measurement.items_per_sec > 0


def test_a_generator_cannot_be_restarted() -> None:
    backend = FakeBackend()
    gen = iter(Source(backend, batches=4))
    with pytest.raises(pipeline_source.PipelineError, match="cannot be restarted"):
        run(gen, backend)
    with pytest.raises(pipeline_source.PipelineError, match="one-pass iterator"):
        pipeline_source.peek_shape(iter([np.zeros((2, 3))]), clock=backend.clock, timeout=1.0)


def test_a_source_that_never_delivers_times_out() -> None:
    backend = FakeBackend()
    never = threading.Event()
    result = timing.run_pipeline(backend, Source(backend, block=never), CONFIG, timeout=0.05)
    never.set()  # let the stuck fetch thread finish
    assert result.status == Status.ERROR
    assert "no batch within 0.05 s (--mxperf-pipeline-timeout)" in (result.error or "")


def test_a_source_slower_than_max_time_is_measured_over_one_batch_and_flagged() -> None:
    backend = FakeBackend()
    src = Source(backend, batch=4, batches=3, seconds=3.0)
    result = run(src, backend)
    assert result.status == Status.OK
    m = result.measurement
    assert m.block_seconds == (3.0,) and m.items_per_sec == pytest.approx(4 / 3.0)
    assert src.served == 2
    assert result.warnings == [timing.slow_warning(3.0, CONFIG.max_time)]


class Turns:
    """`measure.Interleave` of a paired side: in turns, for ``blocks`` blocks."""

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self.rates: list[float] = []
        self.shared_warmup = False

    def ready(self) -> bool:
        return True

    def next(self, rate: float) -> bool:
        self.rates.append(rate)
        return len(self.rates) < self.blocks


def test_a_source_in_turns_keeps_its_blocks_marked_as_timed_in_turns() -> None:
    backend = FakeBackend()
    turns = Turns(4)
    config = replace(CONFIG, interleave=turns)
    result = timing.run_pipeline(backend, Source(backend, batches=50), config, timeout=5.0)
    m = result.measurement
    assert m is not None
    assert m.extra["interleaved"] is True and m.extra["form"] == "pipeline"
    assert len(m.block_seconds) == 4 and len(turns.rates) == 4


def test_a_slow_source_in_turns_times_one_batch_a_turn() -> None:
    backend = FakeBackend()
    src = Source(backend, batch=4, batches=9, seconds=3.0)
    turns = Turns(3)
    config = replace(CONFIG, interleave=turns)
    result = timing.run_pipeline(backend, src, config, timeout=5.0)
    m = result.measurement
    assert m is not None
    assert m.block_seconds == (3.0, 3.0, 3.0) and m.extra["interleaved"] is True
    assert turns.rates == [pytest.approx(4 / 3.0)] * 3
    assert src.served == 5  # the first two (start-up, too slow) untimed in turns
    assert result.warnings == [timing.slow_warning(3.0, CONFIG.max_time, 3)]
    assert "one batch at a time (3 batches)" in result.warnings[0]


class Threaded:
    """A source of the user's own: it may prefetch between fetches."""

    def __iter__(self) -> Iterator[Any]:
        return iter([])


def test_only_sources_known_to_work_only_when_asked_are_timed_in_turns() -> None:
    asked = pipeline_source.fetches_only_when_asked
    assert asked([np.zeros((2, 3))]) and asked((np.zeros((2, 3)),))
    assert not asked(Threaded()) and not asked(iter([np.zeros((2, 3))]))


def test_mxnet_sources_that_work_only_when_asked() -> None:
    mx = pytest.importorskip("mxnet")
    asked = pipeline_source.fetches_only_when_asked
    data = mx.gluon.data.ArrayDataset(mx.nd.zeros((8, 3)))
    assert asked(mx.gluon.data.DataLoader(data, batch_size=2))
    assert asked(mx.io.NDArrayIter(mx.nd.zeros((8, 3)), batch_size=2))
    for threads in (False, True):  # a worker process, or a thread: its pool starts at once
        loader = mx.gluon.data.DataLoader(data, batch_size=2, num_workers=1, thread_pool=threads)
        try:
            assert not asked(loader)
        finally:
            loader._worker_pool.terminate()


def test_input_bound_needs_a_gap_beyond_the_noise_and_a_slow_pipeline() -> None:
    model = input_bound.Figure(1000.0, 0.01)
    slow_pipe = input_bound.Figure(500.0, 0.01)
    bound = input_bound.decide_input_bound(measurement_of(480.0, 0.01), model, slow_pipe)
    assert bound is not None and bound.needed_speedup == pytest.approx(1.0)
    # Within the noise: not input-bound.
    assert input_bound.decide_input_bound(measurement_of(960.0, 0.01), model, slow_pipe) is None
    noisy = input_bound.Figure(1000.0, 0.3)
    assert input_bound.decide_input_bound(measurement_of(700.0, 0.01), noisy, slow_pipe) is None
    # A pipeline far faster than the model: the gap is CPU sharing, not starvation.
    fast_pipe = input_bound.Figure(3000.0, 0.01)
    assert input_bound.decide_input_bound(measurement_of(700.0, 0.01), model, fast_pipe) is None


def test_input_bound_message_names_both_figures_and_the_setting_that_gets_there() -> None:
    bound = input_bound.InputBound(400.0, 1000.0, 420.0, 0.6, 0.05)
    key = CaseKey("k", "pipeline", "float32", 32, "cpu")
    text = input_bound.explain_input_bound(
        key, bound, [("num_workers=0", 420.0), ("num_workers=2", 1100.0)]
    )
    assert "end-to-end 400.0 img/s vs the model alone 1000.0 img/s" in text
    assert "must become 138% faster" in text
    assert "num_workers=2 is enough" in text
    text = input_bound.explain_input_bound(key, bound, [("num_workers=0", 420.0)])
    assert "none is enough" in text


def test_the_input_bound_finding_leads_a_verdict_that_held_and_keeps_failures() -> None:
    bound = input_bound.InputBound(400.0, 1000.0, None, 0.6, 0.05)
    key = CaseKey("k", "training", "float32", 32, "cpu")
    found = input_bound.input_bound_finding(key, bound)
    text = input_bound.explain_input_bound(key, bound)
    assert found == Finding(text, Outcome.INPUT_BOUND)
    for held in (Outcome.PASS, Outcome.NEW, Outcome.IMPROVED):
        assert found.placed(held, ("base",)) == (Outcome.INPUT_BOUND, (*text.split("\n"), "base"))
    regressed = found.placed(Outcome.REGRESSED, ("slow",))
    assert regressed == (Outcome.REGRESSED, ("slow", *text.split("\n")))


def test_sweeps_parse_strictly() -> None:
    assert parsers.parse_sweep({"num_workers": [0, 2]}) == ("num_workers", (0, 2))
    assert timing.point_name("preprocess_threads", 4) == "preprocess_threads=4"
    bad: object
    for bad in ({}, {"a": []}, {"a": 1}, {"a": [1, 1]}, {"1x": [1]}, {"a": [1], "b": [2]}):
        with pytest.raises(ValueError):
            parsers.parse_sweep(bad)
    assert parse_marker((), {"sweep": {"num_workers": [0, 2]}}).sweep == ("num_workers", (0, 2))
    with pytest.raises(MarkerError, match="sweep"):
        parse_marker((), {"sweep": {"num_workers": "02"}})
