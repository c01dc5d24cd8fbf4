"""pytest hooks and fixtures of pytest-mxperf. Hooks stay thin; the work is in pure modules."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf import baselines, fingerprint, options, report
from pytest_mxperf.markers import MARKER_DOC, MarkerError, MarkerSpec, merge, parse_marker
from pytest_mxperf.session import Collected, RunInfo
from pytest_mxperf.verdict import MAX_REL_IQR, OOM

SKIP_REASON = "MXNet benchmark: run `pytest --mxperf` to measure it"


class MxperfState:
    """The run's settings, shared facts and collected results; lives in ``config.stash``."""

    def __init__(self, config: pytest.Config, settings: options.Settings, run: RunInfo) -> None:
        self.config = config
        self.settings = settings
        self.run = run
        self.collected = Collected()
        self.seen: dict[str, str] = {}
        self.errors: list[str] = []
        self.written: list[str] = []
        self.skipped_update: list[str] = []

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # pytest hooks of the enabled plugin -------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """Put each case on the report, then fail the test for a regression (after its body)."""
        try:
            outcome = yield
        except BaseException:
            self._record(item)
            raise
        failures = self._record(item)
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        return outcome

    def _record(self, item: pytest.Item) -> list[str]:
        bench = item.stash.get(BENCH_KEY, None)
        if bench is None:
            return []
        failures = []
        for result in bench.results:
            item.user_properties.append(("mxperf", result.as_dict()))
            if result.verdict and result.verdict["failed"]:
                failures.append("mxperf: " + result.verdict["message"])
        return failures

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the controller for worker reports too: one code path with and without xdist.
        if report.when != "call" or self.is_worker:
            return
        for name, value in report.user_properties:
            if name == "mxperf" and isinstance(value, dict):
                self.collected.add(value)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        run, s = self.run, self.settings
        commit = run.commit
        state = "dirty" if commit.get("dirty") else "clean" if commit.get("dirty") is False else "?"
        lines = [
            f"mxperf: hardware {s.machine or run.cpu_key} (cpu)"
            + "".join(
                f", gpu {i}: {g['name']}"
                + (f" (nvidia-smi index {g['index']})" if g["index"] != str(i) else "")
                for i, g in enumerate(run.gpus)
            ),
            f"mxperf: commit {str(commit.get('sha') or 'unknown')[:10]} "
            f"({commit.get('branch') or 'detached'}, {state}, from {commit.get('source')})",
            f"mxperf: baselines {run.baseline_root} "
            f"({sum(len(v) for v in run.baselines['refs'].values())} case(s) resolved"
            + (f", compared with {s.compare}" if s.compare else "")
            + ")",
            "mxperf: threads " + _threads_text(fingerprint.threads_in_force(os.environ)),
        ]
        workers = _numprocesses(config)
        if workers and run.gpus:
            mapping = ", ".join(
                f"gw{i} -> GPU {fingerprint.gpu_for_worker(f'gw{i}', len(run.gpus))}"
                for i in range(workers)
            )
            lines.append(f"mxperf: xdist GPU mapping {mapping}")
        if workers:
            lines.append("mxperf: xdist: CPU benchmarks take turns (one cross-process lock)")
        lines += [f"mxperf: warning: {w}" for w in run.baselines["warnings"]]
        lines += [f"mxperf: error: {e}" for e in run.baselines["errors"]]
        return lines

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the JSON report and baselines: on the controller only, once."""
        if self.is_worker:
            # Tells the controller this worker finished (a crashed one sends nothing).
            session.config.workeroutput["mxperf"] = {"finished": True}  # type: ignore[attr-defined]
            return
        s = self.settings
        self.errors += self.collected.duplicates
        if s.strict:
            self.errors += self.run.baselines["errors"]
        if s.update and session.exitstatus == pytest.ExitCode.INTERRUPTED:
            self.errors.append("run interrupted: baselines not updated (stored files unchanged)")
        elif s.update:
            self._update()
        if s.json:
            path = Path(s.json)
            extra = {"errors": self.errors, "crashed": self.collected.crashed}
            data = report.to_json(self.collected.results, self.run.as_dict(), s.as_dict(), extra)
            baselines.write_json_atomic(path, data)
        if self.errors and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _update(self) -> None:
        commit = self.run.commit
        by_hw: dict[str, dict[str, dict[str, Any]]] = {}
        for r in self.collected.results:
            if r.status not in ("ok", OOM) or r.rel_iqr > MAX_REL_IQR:
                why = f"block spread {r.rel_iqr:.0%}, too noisy" if r.status == "ok" else r.status
                self.skipped_update.append(f"{r.key} ({why})")
                continue
            by_hw.setdefault(r.hardware, {})[r.key] = report.baseline_record(r, commit)
        root = Path(self.run.baseline_root)
        for hardware, cases in sorted(by_hw.items()):
            try:
                path = baselines.store(root, hardware, commit, cases)
            except baselines.BaselineError as exc:
                self.errors.append(f"baseline not written: {exc}")
                continue
            self.written.append(f"{path} ({len(cases)} case(s))")

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if self.is_worker or config.get_verbosity() < -1:
            return
        tr = terminalreporter
        results = self.collected.results
        width = config.get_terminal_writer().fullwidth
        if results:
            tr.write_sep("-", "mxperf: throughput (images/sec, median ± half IQR)")
            for line in report.render_table(results, width):
                tr.write_line(line)
            for title, lines in report.render_grids(results, width):
                tr.write_sep("-", f"mxperf grid: {title}")
                for line in lines:
                    tr.write_line(line)
            counts = ", ".join(
                f"{n} {status}" for status, n in report.verdict_counts(results).items()
            )
            tr.write_line(f"mxperf verdicts: {counts}")
            stored = sorted(k for k, refs in self.run.baselines["refs"].items() if refs)
            for hardware in sorted({r.hardware for r in results} - set(stored)):
                if stored:
                    tr.write_line(
                        f"mxperf: no baselines for hardware {hardware}; stored for: "
                        f"{', '.join(stored)} (see --mxperf-machine)"
                    )
        for line in self.written:
            tr.write_line(f"mxperf: baseline written: {line}")
        for line in self.skipped_update:
            tr.write_line(f"mxperf: not stored as baseline: {line}")
        for line in self.collected.crashed:
            tr.write_line(f"mxperf: worker crashed: {line}", red=True)
        if s_json := self.settings.json:
            tr.write_line(f"mxperf: JSON report written to {s_json}")
        if self.errors:
            tr.write_sep("=", f"mxperf: {len(self.errors)} error(s)", red=True, bold=True)
            for line in self.errors:
                tr.write_line(line, red=True)


def _threads_text(threads: dict[str, Any]) -> str:
    return f"{threads['omp_threads']} OpenMP thread(s) ({threads['source']})"


def _numprocesses(config: pytest.Config) -> int:
    value = getattr(config.option, "numprocesses", None)
    return value if isinstance(value, int) else 0


STATE_KEY = pytest.StashKey[MxperfState]()
MARKER_KEY = pytest.StashKey[MarkerSpec]()
BENCH_KEY = pytest.StashKey[Any]()


class XdistHooks:
    """Registered only when pytest-xdist is present: run facts to workers, crash notes back."""

    def pytest_configure_node(self, node: Any) -> None:
        state = node.config.stash.get(STATE_KEY, None)
        if state is not None:
            node.workerinput["mxperf"] = {
                "settings": state.settings.as_dict(),
                "run": state.run.as_dict(),
            }

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        state = node.config.stash.get(STATE_KEY, None)
        if state is None:
            return
        out = getattr(node, "workeroutput", None) or {}  # absent when the worker crashed
        if error is not None or "mxperf" not in out:
            wid = getattr(getattr(node, "gateway", None), "id", "?")
            state.collected.crashed.append(f"{wid}: {error or 'no results sent'}")


# module-level hooks ---------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mxperf", "MXNet throughput regression testing (pytest-mxperf)")
    group.addoption(
        "--mxperf",
        action="store_true",
        default=False,
        help="Run MXNet benchmarks, compare them with stored baselines, print a table.",
    )
    group.addoption(
        "--mxperf-update",
        action="store_true",
        default=False,
        help="Store this run's results as the baseline of HEAD for this hardware.",
    )
    group.addoption(
        "--mxperf-allow-dirty",
        action="store_true",
        default=False,
        help="Let --mxperf-update store results measured on a dirty working tree.",
    )
    group.addoption(
        "--mxperf-strict",
        action="store_true",
        default=False,
        help="Fail cases that have no baseline or are too noisy to judge.",
    )
    for spec in options.SPECS:
        group.addoption(
            spec.flag,
            dest="mxperf_" + spec.name,
            default=None,
            metavar=spec.metavar,
            help=f"{spec.help} [env {spec.env}, ini {spec.ini}]",
        )
        parser.addini(spec.ini, spec.help, default="")


def _settings(config: pytest.Config) -> options.Settings:
    flags = {
        "enabled": bool(config.getoption("mxperf")),
        "update": bool(config.getoption("mxperf_update")),
        "allow_dirty": bool(config.getoption("mxperf_allow_dirty")),
        "strict": bool(config.getoption("mxperf_strict")),
    }
    cli = {spec.name: config.getoption("mxperf_" + spec.name) for spec in options.SPECS}
    try:
        return options.resolve(cli, options.environ(), config.getini, flags)
    except options.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "mxperf-xdist")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "mxperf" in workerinput:
        settings = options.Settings.from_dict(workerinput["mxperf"]["settings"])
        run = RunInfo.from_dict(workerinput["mxperf"]["run"])
    else:
        settings = _settings(config)
        if not settings.enabled:
            for flag in ("update", "strict", "allow_dirty"):
                if getattr(settings, flag):
                    raise pytest.UsageError(f"--mxperf-{flag.replace('_', '-')} needs --mxperf")
            return
        run = RunInfo.detect(settings, config.rootpath, os.environ)
        if settings.update:
            _check_update_allowed(settings, run)
    if settings.threads is not None:
        if "mxnet" in sys.modules and os.environ.get("OMP_NUM_THREADS") != str(settings.threads):
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    "mxperf: mxnet was imported before pytest-mxperf could set "
                    f"{settings.threads} thread(s); the setting is recorded but may not apply"
                ),
                stacklevel=2,
            )
        fingerprint.apply_threads(os.environ, settings.threads)
    state = MxperfState(config, settings, run)
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(state, "mxperf-state")


def _check_update_allowed(settings: options.Settings, run: RunInfo) -> None:
    commit = run.commit
    if not commit.get("sha"):
        raise pytest.UsageError(
            "--mxperf-update: no git commit found (not a git repository?); baselines are "
            "stored per commit. Set PYTEST_MXPERF_COMMIT=<sha> to name one."
        )
    if commit.get("dirty") and not settings.allow_dirty:
        raise pytest.UsageError(
            f"--mxperf-update: the working tree of {commit.get('repo_root')} has uncommitted "
            f"changes, so results would not belong to commit {str(commit['sha'])[:10]}. Commit "
            "or stash them, or pass --mxperf-allow-dirty (the baseline then records dirty=true)."
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        del config.stash[STATE_KEY]
        config.pluginmanager.unregister(state)
        if not state.is_worker:
            shutil.rmtree(state.run.lock_dir, ignore_errors=True)


def _is_benchmark(item: pytest.Item) -> bool:
    return (
        "mxperf" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("mxperf") is not None
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    enabled = STATE_KEY in config.stash
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        specs = []
        for mark in item.iter_markers("mxperf"):
            try:
                specs.append(parse_marker(mark.args, mark.kwargs))
            except MarkerError as exc:
                raise pytest.UsageError(f"{item.nodeid}: bad @pytest.mark.mxperf: {exc}") from None
        item.stash[MARKER_KEY] = merge(specs)
        if not enabled and _is_benchmark(item):
            item.add_marker(skip)


def _device_kinds(config: pytest.Config) -> tuple[str, ...]:
    state = config.stash.get(STATE_KEY, None)
    if state is not None and state.settings.ctx:
        return state.settings.ctx
    if state is None:
        try:
            kinds = options.parse_ctx(str(config.getoption("mxperf_ctx") or "auto"))
        except ValueError:
            kinds = ()
        if kinds:
            return kinds
        return ("cpu",)
    return ("gpu",) if state.run.gpus and _mxnet_has_cuda() else ("cpu",)


def _mxnet_has_cuda() -> bool:
    """Whether the installed MXNet is a CUDA build (asked only where nvidia-smi sees GPUs)."""
    from pytest_mxperf.backend import MXNetUnavailable, import_mxnet

    try:
        return bool(import_mxnet().runtime.Features().is_enabled("CUDA"))
    except MXNetUnavailable:
        return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mx_ctx" in metafunc.fixturenames:
        kinds = _device_kinds(metafunc.config)
        metafunc.parametrize("mx_ctx", kinds, indirect=True, ids=list(kinds))


# fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def mxperf_backend() -> Any:
    """The measuring back end (MXNet). Override it in a conftest to use a fake one."""
    from pytest_mxperf.backend import MXNetBackend, MXNetUnavailable

    try:
        return MXNetBackend()
    except MXNetUnavailable as exc:
        pytest.fail(f"mxperf: {exc}", pytrace=False)


def _worker_gpu(config: pytest.Config, backend: Any) -> int:
    n = backend.num_gpus()
    worker = getattr(config, "workerinput", {}).get("workerid")
    return fingerprint.gpu_for_worker(worker, n) if n else 0


def _context(request: pytest.FixtureRequest, backend: Any) -> Any:
    kind = getattr(request, "param", None) or _device_kinds(request.config)[0]
    if kind == "gpu":
        if backend.num_gpus() == 0:
            pytest.skip("no GPU: MXNet sees 0 GPUs here (CPU build, or no visible device)")
        return backend.context("gpu", _worker_gpu(request.config, backend))
    return backend.context("cpu", 0)


@pytest.fixture
def mx_ctx(request: pytest.FixtureRequest, mxperf_backend: Any) -> Any:
    """An MXNet context of each device kind asked for (``--mxperf-ctx``); GPU cases skip where
    MXNet sees no GPU. Under xdist, worker ``gwN`` gets visible GPU ``N mod count``."""
    return _context(request, mxperf_backend)


@pytest.fixture
def mxperf(request: pytest.FixtureRequest, mxperf_backend: Any) -> Any:
    """Benchmark MXNet models in a test: ``mxperf.inference(net, batch_size=32)``,
    ``.training(...)``, ``.forward_backward(...)``, ``.callable(fn, items_per_call=...)``."""
    from pytest_mxperf.fixture import MxPerf

    state = request.config.stash.get(STATE_KEY, None)
    if state is None:
        pytest.skip(SKIP_REASON)
    if "mx_ctx" in request.fixturenames:
        ctx = request.getfixturevalue("mx_ctx")
    else:
        ctx = _context(request, mxperf_backend)
    item = request.node
    bench = MxPerf(
        item=item,
        settings=state.settings,
        run=state.run,
        backend=mxperf_backend,
        marker=item.stash.get(MARKER_KEY, MarkerSpec()),
        default_ctx=ctx,
        seen=state.seen,
    )
    item.stash[BENCH_KEY] = bench
    return bench
