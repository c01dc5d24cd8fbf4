"""How faithful are pytest-mxperf's numbers? Compare them with a plain benchmark_score loop.

For resnet18_v1 (random weights) on the CPU, in inference and in training, this alternates in one
process, round after round:

* plugin: `pytest_mxperf.measuring.runner.run_case` (prepare, warm up, measure, check),
  exactly as the ``mxperf`` fixture does, reporting ``Measurement.items_per_sec`` (median img/s
  over blocks);
* reference: an independent benchmark_score-style loop on its own net instance: 5 dry-run
  batches, then N batches timed with ``time.time()``, waiting for every batch, img/s = N*batch/s.

N is the number of batches the plugin timed in its latest measurement, so both timings last
about as long. The order swaps every round to cancel drift. The verdict is PASS when
median(plugin)/median(reference) lies within 0.95-1.05 for every mode.

Reading the figures: the plugin reports the median of its timed blocks and syncs once per block;
the reference averages over all its batches and waits for every batch. Both effects tend to
favour the plugin (slow outlier blocks are dropped from a median; a per-batch wait leaves the
device idle while Python dispatches the next batch), so on a quiet machine expect the ratio at
about 1.00-1.02, and higher when other processes share the CPUs (see "CPU used by other
processes" in the output).

    python scripts/fidelity.py [--rounds 5] [--batch-size 8] [--size 112] [--threads N]
                               [--modes inference,training] [--min-time 1] [--max-time 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from pytest_mxperf.measuring.measure import MeasureConfig

MODES = ("inference", "training")
LOW, HIGH = 0.95, 1.05
DRY_RUNS = 5


@dataclass(frozen=True)
class PluginRun:
    rate: float  # what the plugin reports: median img/s over its timed blocks
    mean_rate: float  # diagnostic: all timed images / all timed seconds
    batches: int
    seconds: float
    rel_iqr: float


@dataclass(frozen=True)
class ReferenceRun:
    rate: float  # benchmark_score: N*batch / elapsed
    median_rate: float  # diagnostic: median img/s over the single batches
    batches: int
    seconds: float


@dataclass(frozen=True)
class Round:
    plugin: PluginRun
    reference: ReferenceRun
    plugin_first: bool

    @property
    def ratio(self) -> float:
        return self.plugin.rate / self.reference.rate


@dataclass
class ModeResult:
    mode: str
    rounds: list[Round] = field(default_factory=list)

    @property
    def plugin_median(self) -> float:
        return statistics.median(r.plugin.rate for r in self.rounds)

    @property
    def reference_median(self) -> float:
        return statistics.median(r.reference.rate for r in self.rounds)

    @property
    def ratio(self) -> float:
        return self.plugin_median / self.reference_median

    @property
    def mean_ratio(self) -> float:
        """Like for like, all time counted: plugin mean over blocks / reference."""
        plugin = statistics.median(r.plugin.mean_rate for r in self.rounds)
        return plugin / self.reference_median

    @property
    def median_ratio(self) -> float:
        """Like for like, outliers dropped: plugin / reference median over single batches."""
        reference = statistics.median(r.reference.median_rate for r in self.rounds)
        return self.plugin_median / reference

    @property
    def passed(self) -> bool:
        return LOW <= self.ratio <= HIGH


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="alternations per mode (5)")
    parser.add_argument("--batch-size", type=int, default=8, help="images per batch (8)")
    parser.add_argument("--size", type=int, default=112, help="input height and width (112)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="OMP_NUM_THREADS and MXNET_OMP_MAX_THREADS, set before mxnet is imported "
        "(default: MXNet's own choice)",
    )
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated: inference,training"
    )
    parser.add_argument(
        "--min-time", type=float, default=1.0, help="plugin MeasureConfig.min_time (1.0)"
    )
    parser.add_argument(
        "--max-time", type=float, default=5.0, help="plugin MeasureConfig.max_time (5.0)"
    )
    args = parser.parse_args(argv)
    args.mode_list = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.mode_list if m not in MODES]
    if unknown or not args.mode_list:
        parser.error(f"--modes: choose from {', '.join(MODES)} (got {args.modes!r})")
    if args.rounds < 1 or args.batch_size < 1 or args.size < 1:
        parser.error("--rounds, --batch-size and --size must be >= 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    return args


def build_net(mx: Any) -> Any:
    """resnet18_v1 with 1000 classes and random weights (no download), not yet initialized."""
    return mx.gluon.model_zoo.vision.resnet18_v1(classes=1000)


class Reference:
    """A plain benchmark_score-style loop, written independently of the plugin."""

    def __init__(self, mx: Any, mode: str, batch: int, size: int, ctx: Any) -> None:
        import numpy as np

        self.mx, self.mode, self.batch = mx, mode, batch
        net = build_net(mx)
        net.initialize(mx.init.Xavier(magnitude=2), ctx=ctx)
        net.hybridize(static_alloc=True, static_shape=True)
        self.net = net
        # Synthetic data, made once on the device.
        self.data = mx.nd.random.uniform(-1, 1, shape=(batch, 3, size, size), ctx=ctx)
        labels = np.random.RandomState(1).randint(0, 1000, size=(batch,))
        self.label = mx.nd.array(labels, ctx=ctx)
        self.loss = mx.gluon.loss.SoftmaxCrossEntropyLoss()
        self.trainer = mx.gluon.Trainer(
            net.collect_params(),
            "sgd",
            {"learning_rate": 0.01, "momentum": 0.9},
            kvstore=None,
        )
        self.run_batch: Callable[[], None] = self._infer if mode == "inference" else self._train

    def _infer(self) -> None:
        self.net(self.data).wait_to_read()

    def _train(self) -> None:
        autograd = self.mx.autograd
        with autograd.record():
            out = self.net(self.data)
            loss = self.loss(out, self.label)
        loss.backward()
        self.trainer.step(self.batch)
        self.mx.nd.waitall()

    def score(self, num_batches: int) -> ReferenceRun:
        """img/s over ``num_batches`` timed batches after the dry runs.

        Each batch's end is also stamped (one ``time.time()`` call, next to nothing) for the
        diagnostic median; the figure itself is N*batch over the whole elapsed time.
        """
        for _ in range(DRY_RUNS):
            self.run_batch()
        stamps = [time.time()]
        for _ in range(num_batches):
            self.run_batch()
            stamps.append(time.time())
        elapsed = stamps[-1] - stamps[0]
        per_batch = [self.batch / (b - a) for a, b in zip(stamps, stamps[1:])]
        return ReferenceRun(
            rate=num_batches * self.batch / elapsed,
            median_rate=statistics.median(per_batch),
            batches=num_batches,
            seconds=elapsed,
        )


class Plugin:
    """The plugin's own path: `pytest_mxperf.measuring.runner.run_case` (prepare, warm up, measure,
    check), as the ``mxperf`` fixture calls it, on a fresh net each round."""

    def __init__(
        self, mx: Any, mode: str, batch: int, size: int, ctx: Any, cfg: MeasureConfig
    ) -> None:
        from pytest_mxperf.backend.mxnet_backend import MXNetBackend
        from pytest_mxperf.measuring.protocol import PrepareSpec

        self.mx = mx
        self.backend = MXNetBackend()
        self.spec = PrepareSpec(mode=mode, batch_size=batch, ctx=ctx, input_shape=(3, size, size))
        self.config = cfg

    def score(self) -> PluginRun:
        """img/s as the plugin reports it, and how the timed blocks went."""
        from pytest_mxperf.measuring.runner import run_case

        run = run_case(self.backend, build_net(self.mx), self.spec, self.config)
        m = run.measurement
        if m is None or run.error:
            raise RuntimeError(f"plugin step failed or produced bad numbers: {run.error}")
        batches = len(m.block_seconds) * m.steps_per_block
        seconds = sum(m.block_seconds)
        return PluginRun(
            rate=m.items_per_sec,
            mean_rate=batches * m.items_per_step / seconds,
            batches=batches,
            seconds=seconds,
            rel_iqr=m.rel_iqr,
        )


def run_mode(mx: Any, mode: str, args: argparse.Namespace, ctx: Any) -> ModeResult:
    from pytest_mxperf.measuring.measure import MeasureConfig

    cfg = MeasureConfig(min_time=args.min_time, max_time=args.max_time)
    plugin = Plugin(mx, mode, args.batch_size, args.size, ctx, cfg)
    reference = Reference(mx, mode, args.batch_size, args.size, ctx)
    result = ModeResult(mode)
    meter = OtherCpu()
    print(f"\n== {mode} ==")
    print("plugin, ref: img/s as reported (plugin: median over blocks; ref: N*batch/elapsed)")
    print("p.mean: plugin's timed images/seconds; r.median: ref's median over single batches")
    print(
        f"{'round':>5} {'first':>9} {'plugin':>8} {'ref':>8} {'ratio':>6} |"
        f" {'p.N':>4} {'p.time':>7} {'IQR%':>5} {'p.mean':>7} |"
        f" {'r.N':>4} {'r.time':>7} {'r.median':>8}"
    )
    last_batches = 0  # batches the plugin timed last; round 1 runs the plugin first
    for index in range(args.rounds):
        plugin_first = index % 2 == 0
        plugin_run: PluginRun | None = None
        ref_run: ReferenceRun | None = None
        for side in ("plugin", "reference") if plugin_first else ("reference", "plugin"):
            if side == "plugin":
                plugin_run = plugin.score()
                last_batches = plugin_run.batches
            else:
                ref_run = reference.score(max(last_batches, DRY_RUNS))
        assert plugin_run is not None and ref_run is not None
        row = Round(plugin_run, ref_run, plugin_first)
        result.rounds.append(row)
        p, r = row.plugin, row.reference
        print(
            f"{index + 1:>5} {'plugin' if plugin_first else 'reference':>9} "
            f"{p.rate:>8.2f} {r.rate:>8.2f} {row.ratio:>6.3f} |"
            f" {p.batches:>4} {p.seconds:>6.2f}s {100 * p.rel_iqr:>5.1f} {p.mean_rate:>7.2f} |"
            f" {r.batches:>4} {r.seconds:>6.2f}s {r.median_rate:>8.2f}",
            flush=True,
        )
    print(meter.report())
    return result


class OtherCpu:
    """CPU time that other processes used meanwhile (Linux /proc/stat), in cores on average.

    Another benchmark sharing this machine's few cores skews both sides' figures; this says
    whether that happened.
    """

    def __init__(self) -> None:
        self.hz = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self.start = self._snapshot()

    def _snapshot(self) -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as fh:
                fields = fh.readline().split()
        except OSError:
            return None
        # user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
        busy = sum(int(v) for i, v in enumerate(fields[1:9]) if i not in (3, 4)) / self.hz
        own = os.times()
        return busy, own.user + own.system, time.monotonic()

    def report(self) -> str:
        end = self._snapshot()
        if self.start is None or end is None:
            return "CPU used by other processes: n/a"
        busy, own, wall = (b - a for a, b in zip(self.start, end))
        others = max(0.0, busy - own) / max(wall, 1e-9)
        note = " (contended: expect noisy figures)" if others > 0.2 else ""
        return f"CPU used by other processes: {others:.2f} cores on average{note}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        os.environ["MXNET_OMP_MAX_THREADS"] = str(args.threads)

    from pytest_mxperf.system.fingerprint import threads_in_force
    from pytest_mxperf.system.mxnet_import import import_mxnet

    mx = import_mxnet()
    threads = threads_in_force(os.environ)
    engine = os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice (default)")
    print(f"MXNet {mx.__version__}, python {sys.version.split()[0]}, engine {engine}")
    print(
        f"OpenMP threads: {threads['omp_threads']} ({threads['source']}; "
        f"usable CPUs {threads['usable_cpus']})"
    )
    print(
        f"resnet18_v1, batch {args.batch_size}, input 3x{args.size}x{args.size}, cpu, "
        f"{args.rounds} rounds, plugin min_time {args.min_time}s max_time {args.max_time}s"
    )
    started = time.time()
    ctx = mx.cpu()
    meter = OtherCpu()
    results = [run_mode(mx, mode, args, ctx) for mode in args.mode_list]

    print("\n== summary: median(plugin) / median(reference), img/s ==")
    for res in results:
        ratios = [r.ratio for r in res.rounds]
        print(
            f"{res.mode:>9}: plugin {res.plugin_median:8.2f} img/s, reference "
            f"{res.reference_median:8.2f} img/s, ratio {res.ratio:.3f} "
            f"(per-round min {min(ratios):.3f}, max {max(ratios):.3f}) "
            f"{'PASS' if res.passed else 'FAIL'}"
        )
        print(
            f"{'':>11}diagnostics: plugin mean-over-blocks / reference {res.mean_ratio:.3f}; "
            f"plugin / reference median-of-batches {res.median_ratio:.3f}"
        )
    passed = all(res.passed for res in results)
    verdict = "every ratio within" if passed else "a ratio lies outside"
    print(f"{'PASS' if passed else 'FAIL'}: {verdict} {LOW:.2f}-{HIGH:.2f}")
    print(f"total {time.time() - started:.0f}s; {meter.report()}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
