"""What pytest's configuration decides before any test runs: a side's `SideOrders`, the
resolved `Settings` (with a side's overrides), the run facts and the checks that refuse a run,
and the device kinds ``mx_ctx`` is parametrized over. `plugin` calls these from its hooks."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

import pytest

from pytest_mxperf.baselines import store as baselines
from pytest_mxperf.baselines.resolution import CompareError
from pytest_mxperf.baselines.runinfo import RunInfo
from pytest_mxperf.config import options, parsers, sideorders
from pytest_mxperf.config.settings import OptionError, Settings, environ, resolve
from pytest_mxperf.config.sideorders import SideOrders
from pytest_mxperf.paired import worktree
from pytest_mxperf.plugin.hooks import STATE_KEY, numprocesses
from pytest_mxperf.run import outputs
from pytest_mxperf.system import fingerprint, gitinfo, gpuarch, tempdirs

if TYPE_CHECKING:
    from pytest_mxperf.case.roles import CaseRole


def dest(name: str) -> str:
    return "mxperf" if name == "enabled" else "mxperf_" + name


def side_orders(config: pytest.Config) -> SideOrders | None:
    """What a side of a paired run was told (None: this process is no side); a bad hidden
    option is a usage error naming it."""
    try:
        return sideorders.side_orders(lambda name: config.getoption(name, None))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def settings_from(config: pytest.Config, orders: SideOrders | None = None) -> Settings:
    flags = {flag.name: bool(config.getoption(dest(flag.name))) for flag in options.FLAGS}
    cli = {spec.name: config.getoption(dest(spec.name)) for spec in options.SPECS}
    try:
        settings = resolve(cli, environ(), config.getini, flags)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    if orders is not None:
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
            history=None,
            arbitrate=False,
            # Traces only where the controller asked on the command line (HEAD's first round).
            profile=config.getoption(dest("profile")),
        )
    return settings


def role_for(settings: Settings, orders: SideOrders | None) -> CaseRole:
    """What this process does with each case, chosen once: a side when it was given side
    orders, the pair's judge with ``--mxperf-ab``, else the stored baselines' judge."""
    from pytest_mxperf.case import roles  # the case wing loads with an enabled run only

    if orders is not None:
        return roles.Side(orders)
    if settings.ab:
        return roles.PairJudge()
    return roles.StoredJudge()


def detect_run(config: pytest.Config, settings: Settings) -> RunInfo:
    """The run facts on the controller (hardware key from the option or the
    ``pytest_mxperf_hardware_key`` hook), after the checks that refuse a run: a bad hardware key,
    an unusable ``--mxperf-compare``, a CI variable's commit that names none, outputs that
    cannot be written, update/ab preconditions, a visible GPU the installed MXNet build has no
    kernels for (when GPU cases would run)."""
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
    except tempdirs.UnsafeTempDir as exc:  # the user's lock directory is not theirs alone
        raise pytest.UsageError(f"mxperf: {exc}") from None
    bad_commit = gitinfo.env_commit_problem(run.commit)
    if bad_commit is not None:
        raise pytest.UsageError(bad_commit)
    unwritable = outputs.check_outputs(
        settings.json, run.baseline_root if settings.update else None
    ) or outputs.check_summaries(settings.markdown, settings.benchmark_action)
    unwritable = unwritable or outputs.check_profile(settings.profile)
    if unwritable:
        raise pytest.UsageError(unwritable)
    if settings.update:
        check_update_allowed(settings, run)
    if settings.ab:
        check_ab_allowed(config, settings, run)
    elif settings.history:
        raise pytest.UsageError(
            "--mxperf-history keeps paired ratios: give the revision to pair with, "
            '--mxperf-ab REV (e.g. "$(mxperf history base)")'
        )
    refusal = gpuarch.check(settings.ctx, run.gpus)
    if refusal is not None:
        raise pytest.UsageError(refusal.message)
    return run


def check_update_allowed(settings: Settings, run: RunInfo) -> None:
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


def check_ab_allowed(config: pytest.Config, settings: Settings, run: RunInfo) -> None:
    if settings.update:
        raise pytest.UsageError(
            "--mxperf-ab judges two revisions measured now; --mxperf-update stores one run's "
            "figures: use one at a time"
        )
    if numprocesses(config):
        raise pytest.UsageError(
            "--mxperf-ab measures each side in processes of its own, one at a time; drop -n"
        )
    if not run.commit.repo_root:
        # pytest takes its rootdir from the command line's existing paths, option values too
        # (``--mxperf-json /tmp/x/r.json`` made /tmp/x the rootdir): name the one it chose.
        raise pytest.UsageError(
            f"--mxperf-ab {settings.ab}: no git repository at pytest's rootdir {run.rootdir} "
            "(pytest picks it from the paths on the command line, option values included: "
            "write options as --mxperf-json=PATH, or give --rootdir)"
        )
    root = run.commit.repo_root
    if gitinfo.rev_parse(root, str(settings.ab)) is None:
        if gitinfo.is_shallow(root):
            raise pytest.UsageError(
                f"--mxperf-ab: revision {settings.ab!r} is not in {root}, a shallow clone (its "
                f"history is cut short); {gitinfo.DEEPEN}"
            )
        raise pytest.UsageError(
            f"--mxperf-ab: unknown revision {settings.ab!r} in {root} "
            "(fetch it first, e.g. git fetch origin main)"
        )
    try:
        worktree.cache_root()  # where REV is checked out and run: this user's alone
    except tempdirs.UnsafeTempDir as exc:
        raise pytest.UsageError(f"mxperf: --mxperf-ab: {exc}") from None


def device_kinds(config: pytest.Config) -> tuple[str, ...]:
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
    from pytest_mxperf.system.mxnet_import import MXNetUnavailable, import_mxnet

    try:
        return bool(import_mxnet().runtime.Features().is_enabled("CUDA"))
    except MXNetUnavailable:
        return False
