"""The ``mxperf`` marker: expected images/sec per batch size, scoped to hardware.

::

    @pytest.mark.mxperf(expect={1: 160.0, 32: 1050.0}, hardware="gpu-*v100*", tolerance=0.1)
    @pytest.mark.mxperf(expect={"resnet50_v1": {32: 190.0}}, hardware="cpu-*8124m*-72c")

A test may carry several markers (one per hardware pattern). Parsing is strict: unknown or
malformed arguments raise `MarkerError`, which the plugin turns into a usage error naming the test.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_mxperf.config.casekey import DTYPES, MODES, label_problem
from pytest_mxperf.config.expectation import EfficiencyFloor, Expectation
from pytest_mxperf.config.parsers import parse_sweep
from pytest_mxperf.config.scaling_kind import check_kind

MARKER_DOC = (
    "mxperf(expect=None, *, hardware='*', tolerance=None, model=None, mode=None, dtype=None, "
    "max_memory_mb=None): "
    "an MXNet throughput benchmark. expect maps batch size -> expected images/sec (or model -> "
    "{batch size: images/sec}); it applies where the hardware key matches the glob pattern "
    "`hardware`, and to cases of `mode`/`dtype` when given. A case measured below "
    "expected * (1 - tolerance) fails. model also names the cases of the test. "
    "efficiency maps world size -> lowest scaling efficiency of a data-parallel case; "
    "scaling='weak' or 'strong' says which kind its data-parallel cases measure. "
    "sweep={'preprocess_threads': [1, 2, 4]} measures a data pipeline at each value. "
    "max_memory_mb fails a case whose peak memory is above it."
)

ALLOWED = frozenset(
    {
        "expect",
        "hardware",
        "tolerance",
        "model",
        "mode",
        "dtype",
        "efficiency",
        "sweep",
        "max_memory_mb",
        "scaling",
    }
)


class MarkerError(ValueError):
    """A malformed ``mxperf`` marker."""


@dataclass(frozen=True)
class MarkerSpec:
    """Everything the ``mxperf`` markers of one test declare."""

    expectations: tuple[Expectation, ...] = ()
    model: str | None = None
    #: A data-pipeline sweep: the factory's keyword and its values (``mxperf.pipeline``).
    sweep: tuple[str, tuple[Any, ...]] | None = None
    efficiency: tuple[EfficiencyFloor, ...] = ()
    #: The most memory (MiB) a case of the test may peak at.
    max_memory_mb: float | None = None
    #: The scaling kind of the test's data-parallel cases (``"weak"``/``"strong"``), if said.
    scaling: str | None = None

    def efficiency_floor(self, *, model: str, world_size: int, hardware: str) -> float | None:
        """The highest efficiency floor that applies to a data-parallel case, if any."""
        floors = [
            f.floor
            for f in self.efficiency
            if f.applies(model=model, world_size=world_size, hardware=hardware)
        ]
        return max(floors) if floors else None

    def matching(
        self, *, model: str, mode: str, dtype: str, batch_size: int, hardware: str
    ) -> list[Expectation]:
        return [
            e
            for e in self.expectations
            if e.applies(
                model=model, mode=mode, dtype=dtype, batch_size=batch_size, hardware=hardware
            )
        ]


def _batch(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MarkerError(f"{where}: batch size must be a positive int, got {value!r}")
    return value


def _rate(value: Any, where: str) -> float | None:
    if value is None or value == "OOM":
        return None  # a published OOM cell: nothing to expect
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MarkerError(f"{where}: images/sec must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise MarkerError(f"{where}: images/sec must be a positive number, got {value!r}")
    return float(value)


def parse_marker(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> MarkerSpec:
    """Parse one ``mxperf`` marker's arguments (``expect`` may also be the one positional)."""
    kwargs = _arguments(args, kwargs)
    hardware = kwargs.get("hardware", "*")
    if not isinstance(hardware, str) or not hardware:
        raise MarkerError(f"hardware must be a non-empty glob pattern, got {hardware!r}")
    tolerance = kwargs.get("tolerance")
    if tolerance is not None and (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, (int, float))
        or not 0 <= tolerance < 1
    ):
        raise MarkerError(f"tolerance must be a fraction in [0, 1), got {tolerance!r}")
    model = kwargs.get("model")
    bad_model = None if model is None else label_problem("model label", model)
    if bad_model is not None:
        raise MarkerError(f"model: {bad_model}")
    mode = kwargs.get("mode")
    if mode is not None and mode not in MODES:
        raise MarkerError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    dtype = kwargs.get("dtype")
    if dtype is not None and dtype not in DTYPES:
        raise MarkerError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")

    try:
        sweep = parse_sweep(kwargs.get("sweep"))
        scaling = kwargs.get("scaling")
        scaling = None if scaling is None else check_kind(scaling)
    except ValueError as exc:
        raise MarkerError(str(exc)) from None

    max_memory = _max_memory(kwargs.get("max_memory_mb"))
    scope = {
        "hardware": hardware,
        "tolerance": None if tolerance is None else float(tolerance),
        "mode": mode,
        "dtype": dtype,
    }
    return MarkerSpec(
        expectations=_expectations(kwargs.get("expect"), model, scope),
        model=model,
        efficiency=_efficiency(kwargs.get("efficiency"), hardware, model),
        sweep=sweep,
        max_memory_mb=max_memory,
        scaling=scaling,
    )


def _arguments(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The marker's arguments by name: ``expect`` may be the one positional."""
    if len(args) > 1:
        raise MarkerError(f"takes at most one positional argument (expect), got {len(args)}")
    named = dict(kwargs)
    if args:
        if "expect" in named:
            raise MarkerError("expect given both positionally and by keyword")
        named["expect"] = args[0]
    unknown = sorted(set(named) - ALLOWED)
    if unknown:
        raise MarkerError(
            f"unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(sorted(ALLOWED))}"
        )
    return named


def _max_memory(max_memory: Any) -> float | None:
    if max_memory is not None and (
        isinstance(max_memory, bool)
        or not isinstance(max_memory, (int, float))
        or not math.isfinite(max_memory)
        or max_memory <= 0
    ):
        raise MarkerError(f"max_memory_mb must be a positive number of MiB, got {max_memory!r}")
    return None if max_memory is None else float(max_memory)


def _expectations(expect: Any, model: str | None, scope: dict[str, Any]) -> tuple[Expectation, ...]:
    """``expect``'s figures (``{batch: img/s}``, or ``{model: {batch: img/s}}``), each with the
    marker's ``scope`` (hardware, tolerance, mode, dtype)."""
    found: list[Expectation] = []

    def add(m: str | None, table: Any, where: str) -> None:
        if not isinstance(table, Mapping):
            raise MarkerError(f"{where} must map batch size -> images/sec, got {table!r}")
        for batch, rate in table.items():
            size = _batch(batch, where)  # checked on OOM cells too
            value = _rate(rate, f"{where}[{batch!r}]")
            if value is not None:
                found.append(Expectation(images_per_sec=value, batch_size=size, model=m, **scope))

    if expect is not None:
        if not isinstance(expect, Mapping) or not expect:
            raise MarkerError(f"expect must be a non-empty dict, got {expect!r}")
        keys = list(expect)
        if all(isinstance(k, str) for k in keys):
            for m, table in expect.items():
                if model is not None and m != model:
                    raise MarkerError(f"expect names model {m!r} but the marker says {model!r}")
                add(m, table, f"expect[{m!r}]")
        elif any(isinstance(k, str) for k in keys):
            raise MarkerError("expect mixes model names and batch sizes as keys")
        else:
            add(model, expect, "expect")
    return tuple(found)


def _efficiency(value: Any, hardware: str, model: str | None) -> tuple[EfficiencyFloor, ...]:
    """``efficiency={2: 0.85, 8: 0.9}``: world size (>= 2) -> floor in (0, 1]."""
    if value is None:
        return ()
    if not isinstance(value, Mapping) or not value:
        raise MarkerError(f"efficiency must map world size -> fraction, got {value!r}")
    floors = []
    for size, floor in value.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise MarkerError(f"efficiency: world size must be an int >= 2, got {size!r}")
        if (
            isinstance(floor, bool)
            or not isinstance(floor, (int, float))
            or not math.isfinite(floor)
            or not 0 < floor <= 1
        ):
            raise MarkerError(
                f"efficiency[{size}]: the floor must be a fraction in (0, 1], e.g. 0.9, "
                f"got {floor!r}"
            )
        floors.append(EfficiencyFloor(size, float(floor), hardware, model))
    return tuple(floors)


def merge(specs: Iterable[MarkerSpec]) -> MarkerSpec:
    """Combine the markers of one test (closest first, as ``iter_markers`` yields them)."""
    expectations: list[Expectation] = []
    efficiency: list[EfficiencyFloor] = []
    model: str | None = None
    sweep: tuple[str, tuple[Any, ...]] | None = None
    max_memory: float | None = None
    specs = list(specs)
    kinds = {spec.scaling for spec in specs if spec.scaling is not None}
    if len(kinds) > 1:
        raise MarkerError(f"the markers of one test say scaling {' and '.join(sorted(kinds))}")
    for spec in specs:
        expectations.extend(spec.expectations)
        efficiency.extend(spec.efficiency)
        if model is None:
            model = spec.model
        if sweep is None:
            sweep = spec.sweep
        if max_memory is None:
            max_memory = spec.max_memory_mb
    return MarkerSpec(
        expectations=tuple(expectations),
        model=model,
        efficiency=tuple(efficiency),
        sweep=sweep,
        max_memory_mb=max_memory,
        scaling=next(iter(kinds), None),
    )


def is_benchmark(item: pytest.Item) -> bool:
    """A test that measures: it uses the ``mxperf`` fixture or carries the marker."""
    return (
        "mxperf" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("mxperf") is not None
    )
