"""Resolution of settings: CLI > PYTEST_MXPERF_* environment > ini > default."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from pytest_mxperf.config.options import SPECS
from pytest_mxperf.config.parsers import parse_ctx
from pytest_mxperf.config.settings import OptionError, Settings, resolve
from pytest_mxperf.system import codec

FLAGS = {"enabled": True, "update": False, "allow_dirty": False, "strict": False}


def ini_of(values: dict[str, Any]) -> Callable[[str], Any]:
    return lambda key: values.get(key, "")


def settings(
    cli: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    ini: dict[str, Any] | None = None,
    flags: dict[str, bool] | None = None,
) -> Settings:
    return resolve(cli or {}, env or {}, ini_of(ini or {}), flags or FLAGS)


def test_defaults() -> None:
    s = settings()
    assert s == Settings(enabled=True)
    assert s.ctx == ()
    assert s.tolerance == 0.05 and s.unconfirmed_tolerance == 0.20
    assert (s.ab, s.rounds, s.max_rounds, s.min_effect, s.arbitrate) == (None, 2, 10, 0.05, True)
    assert s.min_time == 1.0
    assert s.max_time == 5.0
    assert s.confirm == 2
    assert s.baseline_dir == "baselines"
    assert s.threads is None and s.machine is None and s.compare is None


def test_spec_names() -> None:
    spec = {s.name: s for s in SPECS}["min_time"]
    assert spec.flag == "--mxperf-min-time"
    assert spec.ini == "mxperf_min_time"
    assert spec.env == "PYTEST_MXPERF_MIN_TIME"
    assert len({s.name for s in SPECS}) == len(SPECS)
    assert all(s.help for s in SPECS)


@pytest.mark.parametrize(
    ("name", "env", "ini", "cli", "values"),
    [
        ("tolerance", "PYTEST_MXPERF_TOLERANCE", "mxperf_tolerance", "0.3", (0.3, 0.2, 0.1)),
        ("confirm", "PYTEST_MXPERF_CONFIRM", "mxperf_confirm", "4", (4, 3, 1)),
        ("machine", "PYTEST_MXPERF_MACHINE", "mxperf_machine", "cli-box", ("cli-box", "e", "i")),
        ("ctx", "PYTEST_MXPERF_CTX", "mxperf_ctx", "gpu", (("gpu",), ("cpu",), ("cpu", "gpu"))),
    ],
)
def test_precedence(name: str, env: str, ini: str, cli: str, values: tuple[Any, Any, Any]) -> None:
    env_text = {"tolerance": "0.2", "confirm": "3", "machine": "e", "ctx": "cpu"}[name]
    ini_text = {"tolerance": "0.1", "confirm": "1", "machine": "i", "ctx": "cpu,gpu"}[name]
    from_cli, from_env, from_ini = values
    all_three = settings({name: cli}, {env: env_text}, {ini: ini_text})
    assert getattr(all_three, name) == from_cli
    env_and_ini = settings({name: None}, {env: env_text}, {ini: ini_text})
    assert getattr(env_and_ini, name) == from_env
    assert getattr(settings({}, {}, {ini: ini_text}), name) == from_ini
    default = {s.name: s.default for s in SPECS}[name]
    assert getattr(settings(), name) == default


def test_empty_environment_variable_counts_as_unset() -> None:
    s = settings(env={"PYTEST_MXPERF_TOLERANCE": ""}, ini={"mxperf_tolerance": "0.25"})
    assert s.tolerance == 0.25


def test_empty_ini_value_counts_as_unset() -> None:
    assert settings(ini={"mxperf_min_time": ""}).min_time == 1.0
    assert settings(ini={"mxperf_min_time": []}).min_time == 1.0


def test_flags_are_passed_through() -> None:
    flags = {"enabled": True, "update": True, "allow_dirty": True, "strict": True}
    s = settings(flags=flags)
    assert (s.enabled, s.update, s.allow_dirty, s.strict) == (True, True, True, True)


def error(**sources: Any) -> str:
    with pytest.raises(OptionError) as info:
        settings(**sources)
    return str(info.value)


def test_bad_env_value_names_the_variable() -> None:
    msg = error(env={"PYTEST_MXPERF_TOLERANCE": "1.5"})
    assert "environment variable PYTEST_MXPERF_TOLERANCE" in msg
    assert "'1.5'" in msg
    assert "fraction in [0, 1)" in msg


def test_bad_ini_value_names_the_ini_option() -> None:
    msg = error(ini={"mxperf_min_time": "-2"})
    assert "ini option mxperf_min_time" in msg
    assert "must be > 0" in msg


def test_bad_cli_value_names_the_flag() -> None:
    msg = error(cli={"ctx": "tpu"})
    assert "command line option --mxperf-ctx" in msg
    assert "unknown device kind 'tpu'" in msg


@pytest.mark.parametrize(
    ("cli", "needle"),
    [
        ({"threads": "0"}, "--mxperf-threads"),
        ({"threads": "two"}, "--mxperf-threads"),
        ({"confirm": "-1"}, "--mxperf-confirm"),
        ({"max_time": "0"}, "--mxperf-max-time"),
        ({"warmup_time": "nan"}, "--mxperf-warmup-time"),
        ({"tolerance": "15%"}, "--mxperf-tolerance"),
        ({"seed": "-1"}, "--mxperf-seed: must be in [0, 2**32), or off"),
        ({"seed": "random"}, "--mxperf-seed: must be a whole number, or off"),
    ],
)
def test_bad_values(cli: dict[str, str], needle: str) -> None:
    assert needle in error(cli=cli)


def test_bad_value_in_a_lower_source_is_ignored_when_a_higher_one_wins() -> None:
    s = settings({"tolerance": "0.2"}, {"PYTEST_MXPERF_TOLERANCE": "bogus"})
    assert s.tolerance == 0.2


def test_option_error_is_a_value_error() -> None:
    assert issubclass(OptionError, ValueError)


def test_min_time_larger_than_max_time() -> None:
    msg = error(cli={"min_time": "6"})
    assert "min_time (6.0) is larger than max_time (5.0)" in msg
    assert settings(cli={"min_time": "5", "max_time": "5"}).min_time == 5.0


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("cpu", ("cpu",)),
        ("gpu", ("gpu",)),
        ("cpu,gpu", ("cpu", "gpu")),
        ("GPU, cpu", ("gpu", "cpu")),
        ("cpu,cpu", ("cpu",)),
        ("auto", ()),
        ("  ", ()),
        ("Auto", ()),
    ],
)
def test_parse_ctx(text: str, kinds: tuple[str, ...]) -> None:
    assert parse_ctx(text) == kinds


@pytest.mark.parametrize("text", ["tpu", "cpu,", "cpu,auto", "gpu0"])
def test_parse_ctx_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="unknown device kind"):
        parse_ctx(text)


def test_settings_round_trip() -> None:
    s = Settings(
        enabled=True,
        update=True,
        ctx=("cpu", "gpu"),
        threads=4,
        json="out.json",
        min_time=0.5,
        tolerance=0.2,
        confirm=0,
        machine="ci-fleet",
        compare="abc1234",
    )
    data = codec.to_dict(s)
    assert data["ctx"] == ["cpu", "gpu"]
    assert codec.from_dict(Settings, json.loads(json.dumps(data))) == s
    assert codec.from_dict(Settings, codec.to_dict(Settings())) == Settings()


@pytest.mark.parametrize(("text", "value"), [("on", True), ("OFF", False), ("0", False)])
def test_arbitrate_on_off(text: str, value: bool) -> None:
    s = resolve({"arbitrate": text}, {}, lambda _: None, FLAGS)
    assert s.arbitrate is value


def test_arbitrate_rejects_other_words() -> None:
    with pytest.raises(OptionError, match="--mxperf-arbitrate: must be on or off"):
        resolve({"arbitrate": "sometimes"}, {}, lambda _: None, FLAGS)


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("12345", 12345), ("off", None)])
def test_seed_is_a_number_or_off(text: str, value: int | None) -> None:
    assert resolve({"seed": text}, {}, lambda _: None, FLAGS).seed == value


def test_rounds_above_max_rounds_is_refused() -> None:
    with pytest.raises(OptionError, match="rounds \\(11\\) is larger than max_rounds \\(10\\)"):
        resolve({"rounds": "11"}, {}, lambda _: None, FLAGS)


def test_help_shows_the_spec_default() -> None:
    from pytest_mxperf.config.options import SPECS_BY_NAME

    assert SPECS_BY_NAME["tolerance"].full_help.endswith("Default: 0.05.")
    assert SPECS_BY_NAME["arbitrate"].full_help.endswith("Default: on.")
