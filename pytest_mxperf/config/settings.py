"""Command-line options, ini keys and environment variables resolved once into `Settings`, the
frozen values a run and its xdist workers share: CLI > ``PYTEST_MXPERF_*`` env > ini > default,
and a bad value names where it came from."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from pytest_mxperf.config.options import DEFAULTS, SPECS


class OptionError(ValueError):
    """A setting has a value it cannot take; the message names its source."""


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
    history: str | None = DEFAULTS["history"]
    rounds: int = DEFAULTS["rounds"]
    max_rounds: int = DEFAULTS["max_rounds"]
    pair_budget: float | None = DEFAULTS["pair_budget"]
    pair_cpus: str = DEFAULTS["pair_cpus"]
    pair_lockstep: bool = DEFAULTS["pair_lockstep"]
    pair_confirm: bool = DEFAULTS["pair_confirm"]
    pair_profile: bool = DEFAULTS["pair_profile"]
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
    seed: int | None = DEFAULTS["seed"]
    fixed_malloc: bool = DEFAULTS["fixed_malloc"]
    profile: str | None = DEFAULTS["profile"]
    memory_tolerance: float = DEFAULTS["memory_tolerance"]


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
