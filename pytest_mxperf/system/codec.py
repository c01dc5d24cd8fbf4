"""One codec for the typed records where they leave the process (JSON reports, pytest-xdist's
``workerinput``, a paired run's side files, ``user_properties``) and come back: a frozen
dataclass to plain data and back, as pytest's ``reports.py`` serializes every report through
one pair of functions.

`to_dict` writes each field under its name: enums as their value, tuples as lists, nested
records as dicts, mappings and lists item by item. `from_dict` reads the fields a record has
(other keys are ignored; a missing one takes its default) and types them again from the
field's annotation: ``X | None``, ``Optional[X]``, ``tuple[X, ...]``, ``list[X]``,
``dict[str, X]``, enums and nested records. Annotations are read as text, so the codec works on
Python 3.9, where ``X | None`` cannot be evaluated.

A record whose edge form differs from its fields (a derived figure written beside them, a
renamed field) says so in two hooks: a method ``edge_out(self, data) -> data`` that adjusts
`to_dict`'s output, and a classmethod ``edge_in(cls, data) -> data`` that adjusts the input
before `from_dict` reads it. A record that keeps an ``as_dict``/``from_dict`` pair of its own
(a stored baseline format, read with validation and written byte for byte as before) is
encoded and decoded by it where it is nested in another.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def to_dict(record: Any) -> dict[str, Any]:
    """``record`` (a dataclass instance) as plain data."""
    data = {f.name: encode(getattr(record, f.name)) for f in dataclasses.fields(record)}
    hook = getattr(record, "edge_out", None)
    return data if hook is None else dict(hook(data))


def encode(value: Any) -> Any:
    """Any value as plain data (records through `to_dict`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "as_dict", None)
        return to_dict(value) if own is None else own()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    return value


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """The ``cls`` record `to_dict` wrote as ``data``."""
    hook = getattr(cls, "edge_in", None)
    if hook is not None:
        data = hook(data)
    names = vars(sys.modules[cls.__module__])
    kwargs = {
        f.name: decode(str(f.type), data[f.name], names)
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if f.name in data
    }
    return cls(**kwargs)


def decode(annotation: str, value: Any, names: Mapping[str, Any]) -> Any:
    """``value`` typed as ``annotation`` (text) says; ``names``: the record module's globals."""
    if value is None:
        return None
    text = _not_optional(annotation.strip())
    outer, _, inner = text.partition("[")
    inner = inner[:-1]
    if outer in ("tuple", "Tuple"):
        parts = _split(inner)
        if len(parts) == 2 and parts[1] == "...":
            return tuple(decode(parts[0], v, names) for v in value)
        return tuple(decode(p, v, names) for p, v in zip(parts, value))
    if outer in ("list", "List", "Sequence"):
        return [decode(inner, v, names) for v in value]
    if outer in ("dict", "Dict", "Mapping"):
        item = _split(inner)[1] if inner else "Any"
        return {k: decode(item, v, names) for k, v in value.items()}
    target = names.get(text)
    if isinstance(target, type) and (
        issubclass(target, enum.Enum) or dataclasses.is_dataclass(target)
    ):
        if isinstance(value, target):
            return value  # typed already (an ``edge_in`` hook's work)
        if issubclass(target, enum.Enum):
            return target(value)
        own = getattr(target, "from_dict", None)
        return from_dict(target, value) if own is None else own(value)
    return value


def _not_optional(text: str) -> str:
    if text.startswith("Optional[") and text.endswith("]"):
        return text[len("Optional[") : -1].strip()
    parts = [p.strip() for p in _split(text, "|")]
    kept = [p for p in parts if p != "None"]
    return " | ".join(kept) if kept else text


def _split(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts
