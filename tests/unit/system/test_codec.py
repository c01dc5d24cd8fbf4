"""The one codec of records at the edges (`pytest_mxperf.system.codec`): a dataclass to plain
data and back, typed again from its annotations (read as text, as Python 3.9 needs)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_mxperf.system import codec


class Colour(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner:
    colour: Colour
    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner | None = None
    pair: Optional[tuple[float, float]] = None  # noqa: UP045 (the form the codec reads too)
    inners: list[Inner] = field(default_factory=list)
    by_name: dict[str, Inner] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Renamed:
    lines: tuple[str, ...]

    def edge_out(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"message": "\n".join(data.pop("lines"))}

    @classmethod
    def edge_in(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"lines": str(data.get("message", "")).split("\n")}


def test_a_record_goes_to_plain_data_and_comes_back_typed() -> None:
    record = Outer(
        "a",
        Inner(Colour.RED, (1, 2)),
        (0.5, 1.5),
        [Inner(Colour.BLUE)],
        {"x": Inner(Colour.RED, (3,))},
        {"k": [1, 2]},
    )
    data = codec.to_dict(record)
    assert data["inner"] == {"colour": "red", "sizes": [1, 2]}
    assert data["pair"] == [0.5, 1.5] and data["by_name"]["x"]["colour"] == "red"
    back = codec.from_dict(Outer, json.loads(json.dumps(data)))
    assert back == record and isinstance(back.inner, Inner)
    assert isinstance(back.inner.colour, Colour) and back.inner.sizes == (1, 2)


def test_unknown_keys_are_ignored_and_missing_ones_take_their_default() -> None:
    back = codec.from_dict(Outer, {"name": "b", "added_later": 1, "inner": None})
    assert back == Outer("b")


def test_a_record_with_another_edge_form_says_so_in_its_hooks() -> None:
    data = codec.to_dict(Renamed(("one", "two")))
    assert data == {"message": "one\ntwo"}
    assert codec.from_dict(Renamed, data) == Renamed(("one", "two"))
