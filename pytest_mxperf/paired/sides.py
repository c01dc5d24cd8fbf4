"""A side of a paired run: the pytest process that measures one revision's code, its command
line, its environment and the files it reads (the block plan) and writes (its results).

The side processes run the same node ids with ``--mxperf-side-out`` (a side's options and
their parsing are `pytest_mxperf.config.sideorders`); they import this installed plugin (its package
alone first on ``sys.path``: `pytest_mxperf.system.pluginpath`), not a copy from REV's tree, so
both sides measure the same way and only the repository's code differs (or, with
``--mxperf-env-command``, also REV's environment).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_mxperf.config import sideorders
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.measuring.stats import rel_spread
from pytest_mxperf.paired.pairdata import SideResult
from pytest_mxperf.system import codec, pluginpath
from pytest_mxperf.system.files import write_json_atomic

#: Runs pytest in a side process with this installed plugin importable first, registered
#: through its entry point where the side's environment has one, else passed to pytest (REV's
#: own environment, ``--mxperf-env-command``, need not have the plugin installed).
BOOTSTRAP = (
    "import sys; sys.path.insert(0, {root!r}); import pytest_mxperf.plugin, pytest; "
    "from importlib.metadata import entry_points; e = entry_points(); "
    "g = e.select(group='pytest11') if hasattr(e, 'select') else e.get('pytest11', ()); "
    "known = any(x.name == 'mxperf' for x in g); "
    "sys.exit(pytest.main(sys.argv[1:], plugins=[] if known else [pytest_mxperf.plugin]))"
)
#: Per-side timed-block time as a share of a plain run's ``--mxperf-min-time``: every case is
#: measured 2 x rounds times, and the rounds' spread is mostly between processes
#: (docs/measurements.md), which longer blocks within one process do not shrink. A side also
#: stops there when its blocks disagree (a plain run goes on up to ``--mxperf-max-time``): the
#: pair's interval takes the blocks' spread into account.
SIDE_TIME_SHARE = 0.3
#: A case a side times in a turn of its own (an input pipeline with workers, training with
#: ``data=``) is one short measurement a round; when its blocks spread by more than this share
#: of their median ((max - min) / median) something disturbed it, and it is measured once more
#: in the same turn, the better kept (`runner.better_attempt`: steady before spread, then
#: faster), as a plain run keeps the best of its attempts (how often: docs/measurements.md).
SIDE_RETRY_SPREAD = 0.20


def disturbed(best: Measurement) -> bool:
    """Whether a side's measurement of a case timed in a turn of its own is worth taking once
    more in the same turn: its blocks spread beyond :data:`SIDE_RETRY_SPREAD`."""
    return rel_spread(best.block_rates) > SIDE_RETRY_SPREAD


@dataclass(frozen=True)
class SideSpec:
    """Where a side's code lives and which Python runs it."""

    name: str
    rootdir: Path
    python: str = sys.executable
    #: The whole environment of the side's processes (None: this one, see `side_env`).
    env: dict[str, str] | None = None
    #: The CPUs its processes are pinned to (None: not pinned); the same for both sides.
    cpus: frozenset[int] | None = None
    #: Wider CPUs for its untimed work where lock-step sides set up at once (None: ``cpus``).
    spread: frozenset[int] | None = None


def side_command(side: SideSpec, args: Sequence[str]) -> list[str]:
    """A fresh process of ``side.python`` running ``pytest args`` with this plugin first."""
    return [side.python, "-c", BOOTSTRAP.format(root=pluginpath.import_root()), *args]


def side_args(
    side: SideSpec, settings: Settings, files: Sequence[str], out: Path, select: Path
) -> list[str]:
    """The pytest arguments of one side: ``files`` under ``side.rootdir``, measured the side's
    way and written to ``out``."""
    min_time = settings.min_time * SIDE_TIME_SHARE
    return [
        "--rootdir",
        str(side.rootdir),
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-q",
        "--continue-on-collection-errors",
        sideorders.OUT,
        str(out),
        sideorders.SELECT,
        str(select),
        "--mxperf-min-time",
        str(min_time),
        "--mxperf-max-time",
        str(min_time),
        "--mxperf-warmup-time",
        str(settings.warmup_time),
        "--mxperf-seed",
        "off" if settings.seed is None else str(settings.seed),
        # A side pairs nothing; the controller pinned it already. Its environment's or ini's
        # setting may name CPUs it is not pinned to, which would fail its configure.
        "--mxperf-pair-cpus",
        "off",
        *files,
    ]


def side_env() -> dict[str, str]:
    """The environment of a side: this one, without what would make it pair again or write."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    for name in ("AB", "JSON", "ARBITRATE", "COMPARE", "ENV_COMMAND", "PROFILE"):
        env.pop(f"PYTEST_MXPERF_{name}", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def write_plan(path: Path, plan: Mapping[CaseKey, int]) -> None:
    """The block plan of a round's sides (`pairdata.block_plan`), read by `read_plan`."""
    text = {str(key): steps for key, steps in plan.items()}
    path.write_text(json.dumps(text, sort_keys=True), encoding="utf-8")


def read_plan(path: Path) -> dict[CaseKey, int]:
    """Case key -> steps per timed block, as `write_plan` wrote it.

    :raises ValueError: the file is missing or is not such a mapping (the message names it).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the paired run's block plan {path}: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and type(v) is int and v >= 1 for k, v in data.items()
    ):
        raise ValueError(
            f"the paired run's block plan {path} is not a mapping of case keys to steps >= 1"
        )
    return {CaseKey.parse(k): v for k, v in data.items()}


def write_reuse(path: Path, cases: Sequence[CaseResult]) -> None:
    """A side's earlier results of the cases its next round does not measure again, in a side's
    results file (`write_side`, read by `read_reuse`): the test still runs, and such a case's
    call gets this result back unmeasured, so the test's own code after it runs as before."""
    write_side(path, cases, ())


def read_reuse(path: Path) -> dict[CaseKey, CaseResult]:
    """Case key -> the earlier result `write_reuse` wrote.

    :raises ValueError: the file is missing or unreadable (the message names it)."""
    try:
        return _results(path).cases
    except _UNREADABLE as exc:
        raise ValueError(f"cannot read the paired run's earlier results {path}: {exc}") from None


def write_side(
    path: Path,
    cases: Sequence[CaseResult],
    collect_errors: Sequence[tuple[str, str]],
    test_errors: Mapping[str, str] | None = None,
) -> None:
    """A side's results, written at the end of its session for `read_side`: the measured cases,
    ``(node id, error text)`` of what it could not collect, and why tests failed (node id ->
    ``ExceptionType: message``)."""
    data = {
        "schema": 1,
        "cases": [codec.to_dict(c) for c in cases],
        "collect_errors": [list(e) for e in collect_errors],
        "test_errors": dict(test_errors or {}),
    }
    write_json_atomic(path, data)


#: What reading a results file may raise when it is missing, cut short or not one.
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, AttributeError)


def read_side(path: Path) -> SideResult:
    try:
        return _results(path)
    except _UNREADABLE as exc:
        return SideResult(error=f"no results from the side process ({exc})")


def _results(path: Path) -> SideResult:
    """The results file `write_side` wrote (raises one of `_UNREADABLE` when it cannot)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    read = (codec.from_dict(CaseResult, c) for c in data["cases"])
    cases = {c.key: c for c in read}
    errors = [(str(n), str(t)) for n, t in data.get("collect_errors", [])]
    raised = {str(n): str(t) for n, t in data.get("test_errors", {}).items()}
    return SideResult(cases, errors, test_errors=raised)
