"""A case's stable identity (`CaseKey`: model, mode, dtype, batch, device, ...) and the modes
and dtypes a case may name."""

from __future__ import annotations

import re
from dataclasses import dataclass

MODES = ("inference", "training", "forward_backward", "pipeline")
#: float16: parameters cast, multi_precision SGD (GPU); amp: mxnet.contrib.amp mixed precision
#: with float16 (GPU); bfloat16: AMP with bfloat16 through oneDNN (CPUs with AVX512-BF16/AMX).
DTYPES = ("float32", "float16", "amp", "bfloat16")
#: The dtypes that run through mxnet.contrib.amp, and the low precision each targets.
AMP_TARGETS = {"amp": "float16", "bfloat16": "bfloat16"}


class CaseKeyError(ValueError):
    """A model label or case name that cannot be part of a case key (the message names it)."""


_WORLD_SIZE = re.compile(r"x[0-9]+")


def label_problem(what: str, value: object) -> str | None:
    """Why ``value`` cannot be a case key's ``what`` ("model label", "case name"), or None.

    The key is one ``/``-joined line: in stored baselines, the JSON report, the table and the
    paired run's files. A ``/`` would split it, a newline or other control character would break
    the table, and a name like ``x2`` would read back as a data-parallel world size."""
    if not isinstance(value, str):
        return f"a {what} must be a string, got {value!r} ({type(value).__name__})"
    if not value:
        return f"a {what} must be non-empty"
    if "/" in value:
        return f"a {what} must hold no '/' (it separates the parts of a case key): {value!r}"
    if not value.isprintable():
        return f"a {what} must hold no newline, tab or other control character: {value!r}"
    if what == "case name" and _WORLD_SIZE.fullmatch(value):
        return f"a case name must not look like a world size (x<N>): {value!r}"
    return None


@dataclass(frozen=True, order=True)
class CaseKey:
    """The stable identity of a case: never the pytest node id, which changes with parametrize
    ids, file moves and xdist. ``side`` (a paired run's ``rev``/``head``) and ``world_size``
    (data-parallel ranks or devices) are reserved for the paired and scaling modes."""

    model: str
    mode: str
    dtype: str
    batch_size: int
    device_kind: str
    name: str | None = None
    world_size: int | None = None
    side: str | None = None

    def __post_init__(self) -> None:
        problem = label_problem("model label", self.model)
        if problem is None and self.name is not None:
            problem = label_problem("case name", self.name)
        if problem is not None:
            raise CaseKeyError(problem)

    def __str__(self) -> str:
        parts = [self.model, self.mode, self.dtype, f"bs{self.batch_size}", self.device_kind]
        if self.world_size is not None:
            parts.append(f"x{self.world_size}")
        if self.name:
            parts.append(self.name)
        return "/".join(parts)

    @property
    def label(self) -> str:
        """The model label with the extra name, as tables show it."""
        return self.model + (f" [{self.name}]" if self.name else "")

    @classmethod
    def parse(cls, text: str) -> CaseKey:
        """The inverse of ``str(key)`` (without ``side``, which never reaches a stored key)."""
        parts = text.split("/")
        if len(parts) < 5 or not parts[3].startswith("bs") or not parts[3][2:].isdigit():
            raise ValueError(f"not a case key: {text!r} (model/mode/dtype/bsN/device[/...])")
        world: int | None = None
        rest = parts[5:]
        if rest and rest[0].startswith("x") and rest[0][1:].isdigit():
            world, rest = int(rest[0][1:]), rest[1:]
        if len(rest) > 1:
            raise ValueError(f"not a case key: {text!r} (too many parts)")
        return cls(
            model=parts[0],
            mode=parts[1],
            dtype=parts[2],
            batch_size=int(parts[3][2:]),
            device_kind=parts[4],
            name=rest[0] if rest else None,
            world_size=world,
        )
