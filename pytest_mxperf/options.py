"""Command-line options, ini keys and environment variables, resolved once into `Settings`.

Every setting has one description here; precedence is CLI > ``PYTEST_MXPERF_*`` env > ini >
default, and a bad value names where it came from.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable

DEVICE_KINDS = ("cpu", "gpu")


class OptionError(ValueError):
    """A setting has a value it cannot take; the message names its source."""


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("must be > 0")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError("must be a fraction in [0, 1), e.g. 0.15 for 15%")
    return value


def _nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def _rounds(text: str) -> int:
    value = int(text)
    if value < 2:
        raise ValueError("must be >= 2 (an interval needs two paired rounds)")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be >= 1")
    return value


def parse_ctx(text: str) -> tuple[str, ...]:
    """``"cpu,gpu"`` -> ``("cpu", "gpu")``; ``"auto"`` -> ``()`` (decided when MXNet loads)."""
    text = text.strip().lower()
    if text in ("", "auto"):
        return ()
    kinds: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if part not in DEVICE_KINDS:
            raise ValueError(f"unknown device kind {part!r} (choose from cpu, gpu, auto)")
        if part not in kinds:
            kinds.append(part)
    return tuple(kinds)


def _size(text: str) -> int:
    from pytest_mxperf.sweep import parse_size

    return parse_size(text)


def _text(text: str) -> str:
    return text


def _on_off(text: str) -> bool:
    value = text.strip().lower()
    if value in ("on", "true", "1", "yes"):
        return True
    if value in ("off", "false", "0", "no"):
        return False
    raise ValueError("must be on or off")


def _machine(text: str) -> str:
    # Checked with the other options, naming where the value came from, before anything runs.
    from pytest_mxperf.baselines import BaselineError, check_hardware_key

    try:
        return check_hardware_key(text.strip())
    except BaselineError as exc:
        raise ValueError(str(exc)) from None


@dataclass(frozen=True)
class Spec:
    """One user-settable value: its flag, ini key, env variable, parser, default and help."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str

    @property
    def flag(self) -> str:
        return "--mxperf-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "mxperf_" + self.name

    @property
    def env(self) -> str:
        return "PYTEST_MXPERF_" + self.name.upper()

    @property
    def full_help(self) -> str:
        """The help text with the default written from the spec itself."""
        default = self.default
        if default in (None, ()):
            return self.help
        shown = ",".join(default) if isinstance(default, tuple) else default
        if isinstance(default, bool):
            shown = "on" if default else "off"
        return f"{self.help} Default: {shown}."


@dataclass(frozen=True)
class Flag:
    """A boolean command-line switch (no ini/env: a run's mode is chosen per invocation)."""

    name: str
    help: str

    @property
    def flag(self) -> str:
        return "--mxperf" if self.name == "enabled" else "--mxperf-" + self.name.replace("_", "-")


FLAGS: tuple[Flag, ...] = (
    Flag("enabled", "Run MXNet benchmarks, compare them with stored baselines, print a table."),
    Flag("update", "Store this run's results as the baseline of HEAD for this hardware."),
    Flag("allow_dirty", "Let --mxperf-update store results measured on a dirty working tree."),
    Flag(
        "strict",
        "Fail cases that have no baseline or are too noisy to judge, and cases whose peak "
        "memory grew beyond --mxperf-memory-tolerance.",
    ),
    Flag("memory", "Add each case's peak memory (MiB) as a column of the results table."),
)


SPECS: tuple[Spec, ...] = (
    Spec(
        "ctx",
        parse_ctx,
        (),
        "Device kinds to benchmark on: cpu, gpu, cpu,gpu or auto "
        "(GPU when MXNet sees one, else CPU). Default: auto.",
        "KINDS",
    ),
    Spec(
        "threads",
        _positive_int,
        None,
        "OpenMP threads for MXNet (sets OMP_NUM_THREADS and "
        "MXNET_OMP_MAX_THREADS before MXNet is imported).",
        "N",
    ),
    Spec("json", _text, None, "Write every measured case to this JSON file.", "PATH"),
    Spec(
        "min_time",
        _positive_float,
        1.0,
        "Measure each case for at least this many seconds of timed blocks.",
        "SECONDS",
    ),
    Spec(
        "max_time",
        _positive_float,
        5.0,
        "Soft time budget for the timed blocks of one case "
        "(at least 5 blocks are always measured).",
        "SECONDS",
    ),
    Spec(
        "warmup_time",
        _positive_float,
        10.0,
        "Longest warm-up of one case before measuring "
        "anyway (warm-up stops earlier once throughput is steady).",
        "SECONDS",
    ),
    Spec(
        "tolerance",
        _fraction,
        0.05,
        "Smallest relative throughput drop against the stored baseline that can count as a "
        "regression (twice the case's measured noise widens it); a paired run of the baseline "
        "commit confirms it before the case fails (see --mxperf-arbitrate).",
        "FRACTION",
    ),
    Spec(
        "confirm",
        _nonneg_int,
        2,
        "Re-measure a case that looks regressed up to N more "
        "times before calling it a regression (the best attempt is judged).",
        "N",
    ),
    Spec(
        "baseline_dir",
        _text,
        "baselines",
        "Directory of stored baselines, relative to the rootdir.",
        "DIR",
    ),
    Spec(
        "machine",
        _machine,
        None,
        "Use this hardware key instead of the detected one (for CI "
        "fleets whose runners differ in name only).",
        "NAME",
    ),
    Spec(
        "compare",
        _text,
        None,
        "Compare with the baseline stored for this git revision "
        "instead of the nearest ancestor of HEAD.",
        "REV",
    ),
    Spec(
        "ab",
        _text,
        None,
        "Paired mode: measure every selected case for the code at this git revision and for "
        "the working tree, here, in alternating rounds, each side in its own process, and "
        "judge the pair (no stored baseline involved).",
        "REV",
    ),
    Spec(
        "rounds",
        _rounds,
        3,
        "Rounds of a paired run (each round measures both sides once, order alternating); "
        "more are added, up to --mxperf-max-rounds, while a case is undecided.",
        "N",
    ),
    Spec(
        "max_rounds",
        _rounds,
        6,
        "Most rounds a paired run may take for an undecided case.",
        "N",
    ),
    Spec(
        "min_effect",
        _fraction,
        0.05,
        "Paired verdicts: a slowdown is a regression when it is certain (the confidence "
        "interval of the ratio lies below 1) and a drop of at least this much is not ruled out.",
        "FRACTION",
    ),
    Spec(
        "arbitrate",
        _on_off,
        True,
        "on: a case that looks regressed against its stored baseline is measured again paired "
        "with the baseline commit's code (in a git worktree) before it fails; off: the stored "
        "figure alone decides.",
        "on|off",
    ),
    Spec(
        "unconfirmed_tolerance",
        _fraction,
        0.20,
        "Smallest drop that can fail a case when no paired run can confirm it (arbitration "
        "off, or the baseline commit is not in this clone): sized for noisy shared runners.",
        "FRACTION",
    ),
    Spec(
        "memory_budget",
        _size,
        None,
        "CPU sweeps: the process's peak resident memory a batch size may need (2GiB, 512MiB); "
        "a batch predicted to exceed it is not run and ends the doubling. Default: half the "
        "memory available when the sweep starts.",
        "SIZE",
    ),
    Spec(
        "sweep_time",
        _positive_float,
        600.0,
        "Total time budget of one mxperf.sweep; points left when it runs out are listed as "
        "not measured.",
        "SECONDS",
    ),
    Spec(
        "markdown",
        _text,
        None,
        "Write the verdict table as GitHub-flavoured Markdown to this file (also appended to "
        "$GITHUB_STEP_SUMMARY when that is set).",
        "PATH",
    ),
    Spec(
        "benchmark_action",
        _text,
        None,
        "Write the results as github-action-benchmark's customBiggerIsBetter JSON to this file.",
        "PATH",
    ),
    Spec(
        "price_per_hour",
        _positive_float,
        None,
        "Price of this machine in dollars per hour: adds dollars per million images (and, with "
        "--mxperf-epoch-images, time and dollars per epoch) to the table and the JSON report.",
        "USD",
    ),
    Spec(
        "epoch_images",
        _positive_int,
        None,
        "Images in one epoch for the cost figures (e.g. 1281167 for ImageNet-1k).",
        "N",
    ),
    Spec(
        "env_command",
        _text,
        None,
        "Build an environment per revision for paired runs: a command run in a new venv, "
        "with {python}, {venv} and {wt} (the revision's worktree) substituted, e.g. "
        "'{python} -m pip install -r {wt}/requirements.txt'. Without it both sides use this "
        "environment, so a pair compares code only.",
        "COMMAND",
    ),
    Spec(
        "dist_timeout",
        _positive_float,
        900.0,
        "Longest a data-parallel case with launched ranks (dist kvstores) may run, per "
        "launch; then every rank is ended and that case alone fails with their output.",
        "SECONDS",
    ),
)
SPECS += (
    Spec(
        "pipeline_timeout",
        _positive_float,
        60.0,
        "Longest wait for one batch of a data source (mxperf.pipeline, training with data=); "
        "a source that delivers nothing in this time fails its case instead of hanging the run.",
        "SECONDS",
    ),
)
SPECS += (
    Spec(
        "profile",
        _text,
        None,
        "Write MXNet's Chrome trace (DIR/<case>.trace.json, for chrome://tracing or "
        "ui.perfetto.dev) and aggregate table (DIR/<case>.table.txt) of every case, profiled "
        "after it was measured; the JSON report links them.",
        "DIR",
    ),
    Spec(
        "memory_tolerance",
        _fraction,
        0.10,
        "Growth of a case's peak memory against its baseline that is reported (and fails "
        "with --mxperf-strict); a change must also exceed 16 MiB.",
        "FRACTION",
    ),
)
SPECS_BY_NAME = {spec.name: spec for spec in SPECS}
#: The one place defaults live; `Settings`, `MeasureConfig` and the help text read them here.
DEFAULTS: dict[str, Any] = {spec.name: spec.default for spec in SPECS}


@dataclass(frozen=True)
class Settings:
    """All mxperf settings of one run; built once on the controller, shipped to xdist workers."""

    enabled: bool = False
    update: bool = False
    allow_dirty: bool = False
    strict: bool = False
    memory: bool = False
    ctx: tuple[str, ...] = DEFAULTS["ctx"]
    threads: int | None = DEFAULTS["threads"]
    json: str | None = DEFAULTS["json"]
    min_time: float = DEFAULTS["min_time"]
    max_time: float = DEFAULTS["max_time"]
    warmup_time: float = DEFAULTS["warmup_time"]
    tolerance: float = DEFAULTS["tolerance"]
    confirm: int = DEFAULTS["confirm"]
    baseline_dir: str = DEFAULTS["baseline_dir"]
    machine: str | None = DEFAULTS["machine"]
    compare: str | None = DEFAULTS["compare"]
    ab: str | None = DEFAULTS["ab"]
    rounds: int = DEFAULTS["rounds"]
    max_rounds: int = DEFAULTS["max_rounds"]
    min_effect: float = DEFAULTS["min_effect"]
    arbitrate: bool = DEFAULTS["arbitrate"]
    unconfirmed_tolerance: float = DEFAULTS["unconfirmed_tolerance"]
    env_command: str | None = DEFAULTS["env_command"]
    memory_budget: int | None = DEFAULTS["memory_budget"]
    sweep_time: float = DEFAULTS["sweep_time"]
    dist_timeout: float = DEFAULTS["dist_timeout"]
    markdown: str | None = DEFAULTS["markdown"]
    benchmark_action: str | None = DEFAULTS["benchmark_action"]
    price_per_hour: float | None = DEFAULTS["price_per_hour"]
    epoch_images: int | None = DEFAULTS["epoch_images"]
    pipeline_timeout: float = DEFAULTS["pipeline_timeout"]
    profile: str | None = DEFAULTS["profile"]
    memory_tolerance: float = DEFAULTS["memory_tolerance"]
    #: Set in the processes of a paired run: write measured cases here instead of judging.
    side_out: str | None = None
    #: Set on the first round's side processes: profile every case after measuring it.
    side_profile: bool = False

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["ctx"] = list(self.ctx)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        data = dict(data)
        data["ctx"] = tuple(data.get("ctx", ()))
        return cls(**data)


def resolve(
    cli: dict[str, Any],
    env: dict[str, str],
    ini: Callable[[str], Any],
    flags: dict[str, Any],
) -> Settings:
    """Resolve every `Spec` (CLI > env > ini > default) and the boolean flags into `Settings`.

    :param cli: option values from the command line (``None`` when not given).
    :param env: the process environment.
    :param ini: lookup of an ini key, returning ``""``/``None`` when unset.
    :param flags: the boolean flags (``enabled``, ``update``, ``allow_dirty``, ``strict``).
    """
    values: dict[str, Any] = {}
    for spec in SPECS:
        raw: Any = None
        where = ""
        if cli.get(spec.name) is not None:
            raw, where = cli[spec.name], f"command line option {spec.flag}"
        elif env.get(spec.env, "") != "":
            raw, where = env[spec.env], f"environment variable {spec.env}"
        else:
            ini_value = ini(spec.ini)
            if ini_value not in (None, "", []):
                raw, where = ini_value, f"ini option {spec.ini}"
        if raw is None:
            values[spec.name] = spec.default
            continue
        try:
            values[spec.name] = spec.parse(str(raw))
        except ValueError as exc:
            raise OptionError(f"mxperf: invalid value {raw!r} for {where}: {exc}") from None
    settings = Settings(**flags, **values)
    if settings.min_time > settings.max_time:
        raise OptionError(
            f"mxperf: min_time ({settings.min_time}) is larger than max_time ({settings.max_time})"
        )
    if settings.rounds > settings.max_rounds:
        raise OptionError(
            f"mxperf: rounds ({settings.rounds}) is larger than max_rounds ({settings.max_rounds})"
        )
    return settings


def environ() -> dict[str, str]:
    return dict(os.environ)
