"""pytest hooks and fixtures of pytest-mxperf (the entry point ``mxperf``). Hooks stay thin;
the work is in pure modules; the hook classes are in `pytest_mxperf.hooks`."""

from __future__ import annotations

import dataclasses
import os
import sys
from argparse import SUPPRESS
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mxperf import baselines, fingerprint, gitinfo, options, outputs, parsers
from pytest_mxperf.hooks import (
    BENCH_KEY,
    MARKER_KEY,
    STATE_KEY,
    ProgressHooks,
    SessionHooks,
    XdistHooks,
    _is_benchmark,
    _numprocesses,
)
from pytest_mxperf.markers import MARKER_DOC, MarkerError, MarkerSpec, merge, parse_marker
from pytest_mxperf.resolution import CompareError
from pytest_mxperf.runinfo import RunInfo
from pytest_mxperf.session import MxperfSession
from pytest_mxperf.settings import OptionError, Settings, environ, resolve

if TYPE_CHECKING:
    from pytest_mxperf.fixture import MxPerf
    from pytest_mxperf.protocol import Backend

__all__ = ["BENCH_KEY", "MARKER_KEY", "STATE_KEY"]  # also used by tests and conftests

SKIP_REASON = "MXNet benchmark: run `pytest --mxperf` to measure it"


# module-level hooks ---------------------------------------------------------------------------
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_mxperf import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mxperf", "MXNet throughput regression testing (pytest-mxperf)")
    for flag in options.FLAGS:
        group.addoption(
            flag.flag, action="store_true", default=False, dest=_dest(flag.name), help=flag.help
        )
    for spec in options.SPECS:
        group.addoption(
            spec.flag,
            dest=_dest(spec.name),
            default=None,
            metavar=spec.metavar,
            help=f"{spec.full_help} [env {spec.env}, ini {spec.ini}]",
        )
        parser.addini(spec.ini, spec.full_help, default="")
    # Internal: set by a paired run on the processes that measure one side (see pairing.py).
    group.addoption("--mxperf-side-out", dest="mxperf_side_out", default=None, help=SUPPRESS)
    group.addoption("--mxperf-side-select", dest="mxperf_side_select", default=None, help=SUPPRESS)


def _dest(name: str) -> str:
    return "mxperf" if name == "enabled" else "mxperf_" + name


def _settings(config: pytest.Config) -> Settings:
    flags = {flag.name: bool(config.getoption(_dest(flag.name))) for flag in options.FLAGS}
    cli = {spec.name: config.getoption(_dest(spec.name)) for spec in options.SPECS}
    try:
        settings = resolve(cli, environ(), config.getini, flags)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    side_out = config.getoption("mxperf_side_out")
    if side_out:
        # A side of a paired run measures each case once and reports; the controller judges.
        settings = dataclasses.replace(
            settings,
            enabled=True,
            update=False,
            strict=False,
            confirm=0,
            json=None,
            markdown=None,
            benchmark_action=None,
            ab=None,
            arbitrate=False,
            side_out=str(side_out),
        )
    return settings


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "mxperf-xdist")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "mxperf" in workerinput:
        settings = Settings.from_dict(workerinput["mxperf"]["settings"])
        run = RunInfo.from_dict(workerinput["mxperf"]["run"])
    else:
        settings = _settings(config)
        if not settings.enabled:
            for flag in ("update", "strict", "allow_dirty"):
                if getattr(settings, flag):
                    raise pytest.UsageError(f"--mxperf-{flag.replace('_', '-')} needs --mxperf")
            return
        machine = settings.machine or config.hook.pytest_mxperf_hardware_key(
            config=config, detected=fingerprint.cpu_key()
        )
        if machine is not None:
            try:
                baselines.check_hardware_key(str(machine))
            except baselines.BaselineError as exc:
                raise pytest.UsageError(f"mxperf: {exc}") from None
        try:
            run = RunInfo.detect(settings, config.rootpath, os.environ, machine)
        except CompareError as exc:
            raise pytest.UsageError(str(exc)) from None
        unwritable = outputs.check_outputs(
            settings.json, run.baseline_root if settings.update else None
        ) or outputs.check_summaries(settings.markdown, settings.benchmark_action)
        if unwritable:
            raise pytest.UsageError(unwritable)
        if settings.update:
            _check_update_allowed(settings, run)
        if settings.ab:
            _check_ab_allowed(config, settings, run)
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
    state = MxperfSession(settings, run, is_worker=workerinput is not None)
    config.stash[STATE_KEY] = state
    config.pluginmanager.register(SessionHooks(config, state), "mxperf-session")
    if (
        workerinput is None
        and config.get_verbosity() >= 1
        and not settings.ab
        and not settings.side_out
    ):
        config.pluginmanager.register(ProgressHooks(config), "mxperf-progress")


def _check_update_allowed(settings: Settings, run: RunInfo) -> None:
    commit = run.commit
    if not commit.sha:
        raise pytest.UsageError(
            "--mxperf-update: no git commit found (not a git repository?); baselines are "
            "stored per commit. Set PYTEST_MXPERF_COMMIT=<sha> to name one."
        )
    if commit.dirty and not settings.allow_dirty:
        raise pytest.UsageError(
            f"--mxperf-update: the working tree of {commit.repo_root} has uncommitted "
            f"changes, so results would not belong to commit {commit.short}. Commit "
            "or stash them, or pass --mxperf-allow-dirty (the baseline then records dirty=true)."
        )


def _check_ab_allowed(config: pytest.Config, settings: Settings, run: RunInfo) -> None:
    if settings.update:
        raise pytest.UsageError(
            "--mxperf-ab judges two revisions measured now; --mxperf-update stores one run's "
            "figures: use one at a time"
        )
    if _numprocesses(config):
        raise pytest.UsageError(
            "--mxperf-ab measures each side in processes of its own, one at a time; drop -n"
        )
    if not run.commit.repo_root:
        raise pytest.UsageError(f"--mxperf-ab {settings.ab}: no git repository here")
    if gitinfo.rev_parse(run.commit.repo_root, str(settings.ab)) is None:
        raise pytest.UsageError(
            f"--mxperf-ab: unknown revision {settings.ab!r} in {run.commit.repo_root} "
            "(fetch it first, e.g. git fetch origin main)"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        state.close()
        del config.stash[STATE_KEY]
        for name in ("mxperf-session", "mxperf-progress"):
            hooks = config.pluginmanager.get_plugin(name)
            if hooks is not None:
                config.pluginmanager.unregister(hooks)


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
    select = config.getoption("mxperf_side_select", None)
    if select:
        # A side process runs exactly the node ids the paired run asked for; ids missing at
        # that revision simply produce no case (its verdict says "new").
        wanted = set(Path(select).read_text(encoding="utf-8").split("\n"))
        keep = [item for item in items if item.nodeid in wanted]
        dropped = [item for item in items if item.nodeid not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _device_kinds(config: pytest.Config) -> tuple[str, ...]:
    state = config.stash.get(STATE_KEY, None)
    if state is not None and state.settings.ctx:
        return state.settings.ctx
    if state is None:
        try:
            kinds = parsers.parse_ctx(str(config.getoption("mxperf_ctx") or "auto"))
        except ValueError:
            kinds = ()
        if kinds:
            return kinds
        return ("cpu",)
    return ("gpu",) if state.run.gpus and _mxnet_has_cuda() else ("cpu",)


def _mxnet_has_cuda() -> bool:
    """Whether the installed MXNet is a CUDA build (asked only where nvidia-smi sees GPUs)."""
    from pytest_mxperf.cuda import MXNetUnavailable, import_mxnet

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
def mxperf_backend() -> Backend:
    """The measuring back end (MXNet). Override it in a conftest to use a fake one."""
    from pytest_mxperf.backend import MXNetBackend
    from pytest_mxperf.cuda import MXNetUnavailable

    try:
        return MXNetBackend()
    except MXNetUnavailable as exc:
        pytest.fail(f"mxperf: {exc}", pytrace=False)


def _worker_gpu(config: pytest.Config, backend: Backend) -> int:
    n = backend.num_gpus()
    worker = getattr(config, "workerinput", {}).get("workerid")
    return fingerprint.gpu_for_worker(worker, n) if n else 0


def _context(request: pytest.FixtureRequest, backend: Backend) -> Any:
    kind = getattr(request, "param", None) or _device_kinds(request.config)[0]
    if kind == "gpu":
        if backend.num_gpus() == 0:
            pytest.skip("no GPU: MXNet sees 0 GPUs here (CPU build, or no visible device)")
        return backend.context("gpu", _worker_gpu(request.config, backend))
    return backend.context("cpu", 0)


@pytest.fixture
def mx_ctx(request: pytest.FixtureRequest, mxperf_backend: Backend) -> Any:
    """An MXNet context of each device kind asked for (``--mxperf-ctx``); GPU cases skip where
    MXNet sees no GPU. Under xdist, worker ``gwN`` gets visible GPU ``N mod count``."""
    return _context(request, mxperf_backend)


@pytest.fixture
def mxperf(request: pytest.FixtureRequest, mxperf_backend: Backend) -> MxPerf:
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
        session=state,
        backend=mxperf_backend,
        marker=item.stash.get(MARKER_KEY, MarkerSpec()),
        default_ctx=ctx,
    )
    item.stash[BENCH_KEY] = bench
    return bench
