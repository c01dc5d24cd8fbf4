"""The pytest entry point ``mxperf``: module-level hooks and fixtures that hand their work to the
wings (the longest, ``pytest_configure``, sets the run up: settings, threads, the hook classes
of a session, a paired side or an xdist worker).

The work is in the wings below; this wing only wires them into pytest.

- this module: options, markers, configure/unconfigure, the ``mxperf`` and ``mx_ctx`` fixtures.
- ``hooks``: the hook classes of an enabled run (session, progress, xdist) and the stash keys.
- ``sidehooks``: `SideHooks`, what only a paired run's side process does in pytest (its orders).
- ``configure``: what pytest's configuration decides before any test runs.
- ``hookspec``: the hooks pytest-mxperf offers to conftest files and plugins.
"""

from __future__ import annotations

import os
import sys
from argparse import SUPPRESS
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mxperf.baselines.runinfo import RunInfo
from pytest_mxperf.config import options, sideorders
from pytest_mxperf.config.markers import (
    MARKER_DOC,
    MarkerError,
    MarkerSpec,
    is_benchmark,
    merge,
    parse_marker,
)
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.plugin import configure
from pytest_mxperf.plugin.hooks import (
    BENCH_KEY,
    MARKER_KEY,
    ROLE_KEY,
    STATE_KEY,
    ProgressHooks,
    SessionHooks,
    XdistHooks,
)
from pytest_mxperf.plugin.sidehooks import SideHooks
from pytest_mxperf.run.session import MxperfSession
from pytest_mxperf.system import codec, fingerprint, malloc, mxnet_env, scratch

if TYPE_CHECKING:
    from pytest_mxperf.case.fixture import MxPerf
    from pytest_mxperf.measuring.protocol import Backend

__all__ = ["BENCH_KEY", "MARKER_KEY", "STATE_KEY"]  # also used by tests and conftests

SKIP_REASON = "MXNet benchmark: run `pytest --mxperf` to measure it"


# module-level hooks ---------------------------------------------------------------------------
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_mxperf.plugin import hookspec

    pluginmanager.add_hookspecs(hookspec)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """With mxnet-cu112 installed, load the CUDA libraries of NVIDIA's pip wheels before any
    conftest or test module runs ``import mxnet`` at its top (which would otherwise fail on
    ``libcudnn.so.8``). The CPU build pays one package-metadata lookup."""
    from pytest_mxperf.system import cuda, cudalibs

    if cudalibs.cuda_build() is None:
        return
    try:
        cuda.preload()
    except ValueError as exc:  # a bad PYTEST_MXPERF_CUDA
        raise pytest.UsageError(f"mxperf: {exc}") from None


def _argparse_help(text: str) -> str:
    """`text` for argparse, which %-formats option help: a literal '%' is written '%%'."""
    return text.replace("%", "%%")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mxperf", "MXNet throughput regression testing (pytest-mxperf)")
    for flag in options.FLAGS:
        group.addoption(
            flag.flag,
            action="store_true",
            default=False,
            dest=configure.dest(flag.name),
            help=_argparse_help(flag.help),
        )
    for spec in options.SPECS:
        group.addoption(
            spec.flag,
            dest=configure.dest(spec.name),
            default=None,
            metavar=spec.metavar,
            help=_argparse_help(f"{spec.full_help} [env {spec.env}, ini {spec.ini}]"),
        )
        parser.addini(spec.ini, spec.full_help, default="")
    # Internal: set by a paired run on the processes that measure one side (`config.sideorders`).
    for hidden, switch in sideorders.FLAGS:
        if switch:
            group.addoption(
                hidden, dest=sideorders.dest(hidden), action="store_true", help=SUPPRESS
            )
        else:
            group.addoption(hidden, dest=sideorders.dest(hidden), default=None, help=SUPPRESS)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "mxperf-xdist")
    workerinput = getattr(config, "workerinput", None)
    orders = configure.side_orders(config)
    if workerinput is not None and "mxperf" in workerinput:
        settings = codec.from_dict(Settings, workerinput["mxperf"]["settings"])
        run = codec.from_dict(RunInfo, workerinput["mxperf"]["run"])
    else:
        settings = configure.settings_from(config, orders)
        if not settings.enabled:
            for flag in ("update", "strict", "allow_dirty"):
                if getattr(settings, flag):
                    raise pytest.UsageError(f"--mxperf-{flag.replace('_', '-')} needs --mxperf")
            return
        _refuse_bad_mxnet_env(settings)
        run = configure.detect_run(config, settings)
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
    if settings.fixed_malloc:
        malloc.fix_allocator(os.environ)
    else:
        os.environ[options.SPECS_BY_NAME["fixed_malloc"].env] = "off"  # paired sides read it too
    scratch.share_worker_tempdir()
    state = MxperfSession(settings, run, is_worker=workerinput is not None, side=orders)
    config.stash[STATE_KEY] = state
    config.stash[ROLE_KEY] = configure.role_for(settings, orders)
    config.pluginmanager.register(SessionHooks(config, state), "mxperf-session")
    if orders is not None:
        config.pluginmanager.register(SideHooks(state, orders), "mxperf-side")
    elif workerinput is None and config.get_verbosity() >= 1 and not settings.ab:
        config.pluginmanager.register(ProgressHooks(config), "mxperf-progress")


def _refuse_bad_mxnet_env(settings: Settings) -> None:
    """Refused here, before MXNet loads (in a paired side too, with the environment it was
    given): MXNet would abort the whole session on it (exit 134, no table)."""
    env = dict(os.environ)
    if settings.threads is not None:
        fingerprint.apply_threads(env, settings.threads)
    problem = mxnet_env.env_problem(env)
    if problem is not None:
        raise pytest.UsageError(f"mxperf: {problem}")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        state.close()
        del config.stash[STATE_KEY]
        if ROLE_KEY in config.stash:
            del config.stash[ROLE_KEY]
        for name in ("mxperf-session", "mxperf-side", "mxperf-progress"):
            hooks = config.pluginmanager.get_plugin(name)
            if hooks is not None:
                config.pluginmanager.unregister(hooks)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    enabled = STATE_KEY in config.stash
    for item in items:
        try:
            item.stash[MARKER_KEY] = merge(
                [parse_marker(mark.args, mark.kwargs) for mark in item.iter_markers("mxperf")]
            )
            bad = None
        except MarkerError as exc:  # also markers that disagree (the scaling kind)
            bad = f"{item.nodeid}: bad @pytest.mark.mxperf: {exc}"
        if enabled and bad is not None:
            raise pytest.UsageError(bad)
        if not enabled and is_benchmark(item):
            # A plain run skips benchmarks: a bad marker is said in the reason (-rs), and
            # blocks only the benchmark runs it would break.
            reason = SKIP_REASON if bad is None else f"{SKIP_REASON} ({bad})"
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mx_ctx" in metafunc.fixturenames:
        kinds = configure.device_kinds(metafunc.config)
        metafunc.parametrize("mx_ctx", kinds, indirect=True, ids=list(kinds))


# fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def mxperf_backend() -> Backend:
    """The measuring back end (MXNet). Override it in a conftest to use a fake one."""
    from pytest_mxperf.backend.mxnet_backend import MXNetBackend
    from pytest_mxperf.system.mxnet_import import MXNetUnavailable

    try:
        return MXNetBackend()
    except MXNetUnavailable as exc:
        pytest.fail(f"mxperf: {exc}", pytrace=False)


def _worker_gpu(config: pytest.Config, backend: Backend) -> int:
    n = backend.num_gpus()
    worker = getattr(config, "workerinput", {}).get("workerid")
    return fingerprint.gpu_for_worker(worker, n) if n else 0


def _context(request: pytest.FixtureRequest, backend: Backend) -> Any:
    kind = getattr(request, "param", None) or configure.device_kinds(request.config)[0]
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
    from pytest_mxperf.case.fixture import MxPerf

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
        role=request.config.stash[ROLE_KEY],
    )
    item.stash[BENCH_KEY] = bench
    return bench
