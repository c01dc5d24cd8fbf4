"""A side's hidden options parsed once into `SideOrders`, and the side command line they come
from."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf.config import sideorders
from pytest_mxperf.config.settings import OptionError, Settings
from pytest_mxperf.config.sideorders import SideOrders, Turns, parse_turns, side_orders
from pytest_mxperf.paired import sides


def _orders(**given: Any) -> SideOrders | None:
    values = {
        sideorders.dest(flag): given.get(sideorders.dest(flag)) for flag, _ in sideorders.FLAGS
    }
    return side_orders(values.__getitem__)


def test_without_an_out_file_the_process_is_no_side() -> None:
    assert _orders() is None
    # The other hidden options alone make no side (they are ignored, as before).
    assert _orders(mxperf_side_plan="plan.json", mxperf_side_turns="rev=/x") is None


def test_only_an_out_file_is_a_side_measuring_alone() -> None:
    assert _orders(mxperf_side_out="rev.json") == SideOrders(out=Path("rev.json"))


def test_every_order_is_read_and_parsed() -> None:
    orders = _orders(
        mxperf_side_out="head.json",
        mxperf_side_select="select.txt",
        mxperf_side_profile=True,
        mxperf_side_turns="head=/tmp/round/turns.sock",
        mxperf_side_spread="0-2,5",
        mxperf_side_plan="plan.json",
    )
    assert orders == SideOrders(
        out=Path("head.json"),
        select=Path("select.txt"),
        profile=True,
        turns=Turns("head", Path("/tmp/round/turns.sock")),
        spread=frozenset({0, 1, 2, 5}),
        plan=Path("plan.json"),
    )


def test_empty_values_are_not_given() -> None:
    orders = _orders(mxperf_side_out="o.json", mxperf_side_turns="", mxperf_side_spread="")
    assert orders == SideOrders(out=Path("o.json"))


def test_turns_text_round_trips() -> None:
    turns = parse_turns("rev=/tmp/a=b/turns.sock")  # only the first '=' splits
    assert turns == Turns("rev", Path("/tmp/a=b/turns.sock"))
    assert parse_turns(str(turns)) == turns


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (
            {"mxperf_side_turns": "no-path"},
            "'no-path' for command line option --mxperf-side-turns: wants NAME=PATH",
        ),
        ({"mxperf_side_turns": "=/x"}, "--mxperf-side-turns: wants NAME=PATH"),
        ({"mxperf_side_turns": "rev="}, "--mxperf-side-turns: wants NAME=PATH"),
        (
            {"mxperf_side_spread": "0-x"},
            "'0-x' for command line option --mxperf-side-spread: "
            "'0-x' is not a CPU number or range",
        ),
        ({"mxperf_side_spread": "3-1"}, "--mxperf-side-spread: '3-1' is not a CPU range"),
    ],
)
def test_a_bad_value_is_an_error_naming_the_option(given: dict[str, str], problem: str) -> None:
    with pytest.raises(OptionError, match="mxperf: invalid value") as caught:
        _orders(mxperf_side_out="o.json", **given)
    assert problem in str(caught.value)


def test_the_side_command_line_parses_into_the_orders_it_was_given(tmp_path: Path) -> None:
    # The controller writes the flags (`paired.sides.side_args`), the side parses them: the
    # same package version on both ends, one spelling of each flag.
    spec = sides.SideSpec("rev", tmp_path)
    argv = sides.side_args(
        spec, Settings(), ["t.py"], tmp_path / "rev.json", tmp_path / "select.txt"
    )
    argv += [sideorders.PLAN, str(tmp_path / "plan.json"), sideorders.PROFILE]
    argv += [sideorders.TURNS, str(Turns("rev", tmp_path / "turns.sock")), sideorders.SPREAD, "0-1"]
    parser = argparse.ArgumentParser(add_help=False)
    for flag, switch in sideorders.FLAGS:
        if switch:
            parser.add_argument(flag, dest=sideorders.dest(flag), action="store_true")
        else:
            parser.add_argument(flag, dest=sideorders.dest(flag), default=None)
    known, _ = parser.parse_known_args(argv)
    assert side_orders(lambda name: getattr(known, name)) == SideOrders(
        out=tmp_path / "rev.json",
        select=tmp_path / "select.txt",
        profile=True,
        turns=Turns("rev", tmp_path / "turns.sock"),
        spread=frozenset({0, 1}),
        plan=tmp_path / "plan.json",
    )
