"""Shared fixtures of this repository's suites: fake back ends and git repositories for the
plugin's own tests, and the quick/full selection of the model benchmark suite. Helpers that
tests and scripts import live in `pytest_mxperf.testing`, not here."""

from __future__ import annotations

import compileall
import importlib
import importlib.util
import os
import pkgutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest
from _pytest import config as pytest_config

import pytest_mxperf
from pytest_mxperf.config.options import SPECS_BY_NAME
from pytest_mxperf.paired.forkserver import PRELOAD_ENV
from pytest_mxperf.system import malloc
from pytest_mxperf.testing.procs import descendants, gone
from pytest_mxperf.testing.repos import git
from pytest_mxperf.testing.unprobed import UNPROBED_CONFTEST

#: The environment variable of ``--mxperf-pair-cpus``.
PAIR_CPUS_ENV = SPECS_BY_NAME["pair_cpus"].env

#: A user's project that scripts/wheel_check.sh runs with the installed wheel: not this suite's.
collect_ignore = ["tests/data"]

# With bytecode writing off (PYTHONDONTWRITEBYTECODE=1, as on the CI VM), every process the suite
# starts compiled this package's sources anew: each fork server of a paired run, each pytest or
# mxperf subprocess, each xdist worker (about 0.2 s of CPU a process that imports the package;
# hundreds of them). Compiled once here, into the __pycache__ folders Python itself writes when
# bytecode writing is on, they load from there (checked against the sources' times and sizes, as
# always); an up-to-date file is only looked at. A source that cannot be compiled is left to the
# import that reports it.
if sys.dont_write_bytecode:
    compileall.compile_dir(os.path.dirname(pytest_mxperf.__file__), quiet=2)

# pytester's in-process runs drop the modules they imported; a later run's ``from wing import
# module`` then finds the earlier run's module still set on the wing's package, and two copies
# of one exception class meet (an ``except`` misses it). Importing every module here, once,
# keeps one copy of each (0.3 s; none of them imports mxnet at module level). GitPython too:
# imported lazily by every run's commit detection, it was imported again by each in-process run.
_MODULES = [m.name for m in pkgutil.walk_packages(pytest_mxperf.__path__, "pytest_mxperf.")]
for _name in [*_MODULES, "git"]:
    importlib.import_module(_name)

#: The other pytest plugins installed here (pytest-xdist, platformdirs' plugin) and what they
#: import: each side loads them by their entry points, and pytest compiled them anew for its
#: assertion rewriting in every side (about 0.1 s of a side's 0.3 s).
_ENTRY_POINT_PLUGINS = [
    "xdist.plugin",
    "xdist.looponfail",
    "xdist.newhooks",
    "platformdirs.pytest_plugin",
]
_OTHER_PLUGINS = [
    name for name in _ENTRY_POINT_PLUGINS if importlib.util.find_spec(name.split(".")[0])
]

#: What only the ``mxperf`` command imports: the cli wing, and the history's index, page and
#: bisect, which bring numpy. No side imports them; preloaded, they were half of each fake
#: paired run's server's imports (0.6 -> 0.3 s of CPU a server, two or more a paired run).
COMMAND_ONLY = (
    "pytest_mxperf.cli",
    "pytest_mxperf.history.anchors",
    "pytest_mxperf.history.bisection",
    "pytest_mxperf.history.fit",
    "pytest_mxperf.history.index",
    "pytest_mxperf.history.page",
)

#: pytest's own plugins, some of which it imports only once a session is configured (junitxml,
#: pdb and readline for debugging): the default preload's list (`forkserver.default_preload`).
_PYTEST_PLUGINS = [
    f"_pytest.{name}"
    for name in (
        *getattr(pytest_config, "essential_plugins", ()),
        *getattr(pytest_config, "default_plugins", ()),
    )
]

#: What a fake side still imported for itself with the modules above preloaded: the standard
#: library's behind pytest's debugging, faulthandler and argcomplete plugins and the
#: multiprocessing a session sets up (0.068-0.095 -> 0.062-0.066 CPU-s a fake side).
_SESSION_STDLIB = [
    "pdb",
    "readline",
    "faulthandler",
    "pwd",
    "multiprocessing.reduction",
    "multiprocessing.util",
]

#: What the fork servers of paired runs preload for the fake back end: not MXNet, but GitPython,
#: pytest's own plugins, this package (less `COMMAND_ONLY`), the other plugins and
#: `_SESSION_STDLIB`, which each side would otherwise import again (a few tenths of a second a
#: side, eight or more sides a paired run; pytest's plugins 0.075 -> 0.063 CPU-s a fake side).
FAKE_SIDE_PRELOAD = ",".join(
    [
        "git",
        *_PYTEST_PLUGINS,
        "_pytest._argcomplete",
        *(m for m in _MODULES if not m.startswith(COMMAND_ONLY)),
        *_OTHER_PLUGINS,
        *_SESSION_STDLIB,
    ]
)

#: Whether /proc lists this machine's processes (Linux): `fake_pytester` checks its tests' then.
_PROC = Path("/proc/self/stat").exists()

FAKE_BACKEND_CONFTEST = """
import pytest
from pytest_mxperf.testing import FakeBackend, FakeModel

@pytest.fixture(scope="session")
def mxperf_backend():
    return FakeBackend()
"""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--suite",
        choices=("quick", "full", "scaling"),
        default=os.environ.get("MXPERF_SUITE", "quick"),
        help="Model benchmark suite selection: quick (2-core CPU, default), full "
        "(every published network and batch size 1-256 and the scaling cases, for GPU "
        "runners) or scaling (the data-parallel scaling cases only). Env MXPERF_SUITE.",
    )


#: The plugin's advice (peak memory grew, start-up grew, ...) is shown, not made an error by
#: this project's ``filterwarnings = error``: in the benchmark suite only the verdicts fail.
ADVICE = pytest.mark.filterwarnings("default:mxperf:pytest.PytestWarning")


#: This suite's longest tests (7 s or more each in `pytest -n 2 --dist worksteal
#: --durations=80`, 2026-11-28, on an otherwise idle VM), longest first: they run first.
#: ``--dist worksteal`` hands each worker half of the tests in collection order and moves tests
#: only from the end of a queue, and a worker runs its last two alone: in collection order those
#: could be a 20-80 s test, which the other worker waited out idle. First, the tests left at the
#: end are short ones (about 2-3% of the suite's wall time in a simulation from the measured
#: durations). A module's entry (``path::``) keeps its tests together, in collection order:
#: test_dataparallel_mxnet's share a module-scoped launch, which each worker that runs one of
#: them would launch again. Only the order changes; a name here that no longer matches a test
#: moves nothing.
LONGEST_FIRST = (
    "tests/plugin/test_real_regression.py::test_identical_reruns_pass_and_a_slower_model_fails",
    "tests/plugin/test_data_parallel_real.py::test_dist_sync_through_the_fixture",
    "tests/plugin/test_diagnosis_real.py::test_added_dense_block_is_named_first",
    "tests/unit/distributed/test_dataparallel_mxnet.py::",
    "tests/plugin/test_pipeline_plugin.py::test_real_input_bound_and_compute_bound",
    "tests/plugin/test_xdist.py::test_real_model_under_xdist_matches_serial",
    "tests/plugin/test_workflow_recipe.py::test_fork_pr_ten_percent_slower_then_fixed",
    "tests/plugin/test_workflow_recipe.py::test_pushes_to_main_build_the_history",
    "tests/plugin/test_history_emulation.py::",
    "tests/plugin/test_sweeps.py::test_a_real_cpu_allocation_failure_ends_the_doubling",
    "tests/plugin/test_workflow_recipe.py::test_identical_pr_with_real_mxnet",
    "tests/plugin/test_paired_envs.py::test_a_pair_in_the_baselines_environment_judges",
    "tests/plugin/test_paired_envs.py::test_revs_environment_gets_the_plugins_own_requirements",
    "tests/plugin/test_history_bisect_run.py::",
    "tests/plugin/test_data_parallel_real.py::test_dist_timeout_ends_every_rank",
    "tests/plugin/test_preflight.py::test_a_regression_is_no_evidence_that_the_machine_is_off",
    "tests/plugin/test_preflight.py::test_a_regression_the_joint_pair_finds_in_an_earlier_case",
    "tests/plugin/test_arbitration_flow.py::test_a_pass_more_than_half_the_floor_below_its_figure",
    "tests/plugin/test_xdist.py::test_xdist_update_writes_once",
    "tests/unit/distributed/test_mxnet_launch.py::test_mxnets_launch_py_runs_a_dist_sync_job",
    "tests/plugin/test_preflight.py::test_a_slower_hour_the_probe_measures_needs_no_pair",
    "tests/plugin/test_bad_inputs.py::test_cpu_out_of_memory_is_a_result_and_the_run_goes_on",
    "tests/plugin/test_paired_envs.py::test_same_code_under_other_software_is_paired_only_in",
)


def _longest_first(items: list[pytest.Item]) -> None:
    """`LONGEST_FIRST`'s tests to the front of ``items``, in its order; the rest keep theirs."""

    def rank(item: pytest.Item) -> int:
        return next(
            (i for i, name in enumerate(LONGEST_FIRST) if item.nodeid.startswith(name)),
            len(LONGEST_FIRST),
        )

    items.sort(key=rank)  # stable: equal ranks keep the collection order


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The benchmark suite's tests take the plugin's warnings as advice (`ADVICE`);
    ``--suite scaling`` measures the data-parallel scaling cases only: every other measuring
    test of ``tests/perf`` (pipelines, GluonCV) is deselected. The longest tests run first
    (`LONGEST_FIRST`)."""
    _longest_first(items)
    for item in items:
        if item.path.parent.name == "perf":
            item.add_marker(ADVICE)
    if config.getoption("suite") != "scaling":
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        path = item.path
        measures = "mxperf" in getattr(item, "fixturenames", ())
        other = path.parent.name == "perf" and path.name != "test_scaling.py"
        (dropped if measures and other else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


#: What pytest-xdist sets in a worker's environment: an inner run that inherits them takes
#: itself for an xdist worker (its cases say gw0) when this suite itself runs under ``-n N``.
XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's `pytester`, whose runs (in process and subprocess) are never xdist workers,
    also when this suite runs under ``pytest -n N``."""
    for name in XDIST_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # An in-process run sets these for the processes it starts (`pytest_mxperf.system.malloc`,
    # ``--mxperf-fixed-malloc off``): put back as they were after the test.
    for name in (malloc.VARIABLE, SPECS_BY_NAME["fixed_malloc"].env):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        if not os.environ[name]:
            monkeypatch.delenv(name)  # unset again after the test, whatever a run set
    return pytester


@pytest.fixture
def fake_pytester(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[pytest.Pytester]:
    """A pytester whose runs measure with `pytest_mxperf.testing.FakeBackend`.

    Its runs get a temporary directory of their own (in-process and in subprocesses), so the
    machine-wide device locks they take are theirs alone: a fake measurement never waits for a
    real benchmark running on this machine, nor holds one up. A process its runs started and
    left running fails the test (where /proc tells)."""
    for name in list(os.environ):
        if name.startswith("PYTEST_MXPERF_") or name in ("GITHUB_SHA", "CI_COMMIT_SHA"):
            monkeypatch.delenv(name)
    # The fake back end needs no MXNet: paired runs' fork servers need not import it.
    monkeypatch.setenv(PRELOAD_ENV, FAKE_SIDE_PRELOAD)
    # Nor has it threads to size to CPUs: its sides are not pinned (with `auto` the sides of
    # both xdist workers' paired runs crowd onto the upper CPU while the other idles). The
    # pinning itself: test_paired_lockstep (the flag) and `real_pytester` (the default).
    monkeypatch.setenv(PAIR_CPUS_ENV, "off")
    own_tmp = str(tmp_path_factory.mktemp("tmpdir"))
    monkeypatch.setenv("TMPDIR", own_tmp)
    monkeypatch.setattr(tempfile, "tempdir", own_tmp)
    # No bytecode for the suites its runs import in this process: a test edits test_suite.py
    # and runs again within the same second, and a file of the same size (SPEED = 0.9 -> 0.7)
    # would be served from pytest's cached rewrite of the old one (seen with pytest 8.4).
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    pytester.makeconftest(FAKE_BACKEND_CONFTEST)
    before = set(descendants(os.getpid())) if _PROC else set()
    yield pytester
    # No process a test's runs started (fork servers, their importer, sides) outlives it.
    left = [pid for pid in descendants(os.getpid()) if pid not in before] if _PROC else []
    assert gone(left, within=10), f"processes outlived the test: {left}"


@pytest.fixture
def real_pytester(
    fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    """`fake_pytester` whose runs measure with the real MXNet back end, without the machine
    probes, which none of these tests checks (`UNPROBED_CONFTEST` in place of the fake one; the
    probes' own test is tests/unit/backend/test_probes.py): about three seconds of CPU less in
    every process that measures. The fork servers of their paired runs preload MXNet, as a
    user's run's do (the default), so no side pays ``import mxnet`` again (a second or more a
    side)."""
    (fake_pytester.path / "conftest.py").write_text(UNPROBED_CONFTEST)
    monkeypatch.delenv(PRELOAD_ENV)
    monkeypatch.delenv(PAIR_CPUS_ENV)  # pinned as a user's paired run is (auto)
    return fake_pytester


@pytest.fixture
def commit(fake_pytester: pytest.Pytester) -> Callable[[str], str]:
    """Turn the pytester directory into a git repository; ``commit(msg)`` commits all, -> sha."""
    path = fake_pytester.path
    git(path, "init", "-q", "-b", "main")
    (path / ".gitignore").write_text("__pycache__/\n*.json.tmp\nreport.json\n")

    def do(message: str = "change") -> str:
        git(path, "add", "-A")
        git(path, "commit", "-q", "--allow-empty", "-m", message)
        return git(path, "rev-parse", "HEAD")

    return do
