"""Parsing of the ``mxperf`` marker and matching its expectations to cases."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.config.markers import MarkerError, MarkerSpec, merge, parse_marker

V100 = "gpu-tesla-v100-sxm2-16gb-x1"
EPYC = "cpu-amd-epyc-2c"


def parse(*args: Any, **kwargs: Any) -> MarkerSpec:
    return parse_marker(args, kwargs)


def match(spec: MarkerSpec, **case: Any) -> list[Expectation]:
    full = {
        "model": "resnet50_v1",
        "mode": "inference",
        "dtype": "float32",
        "batch_size": 32,
        "hardware": V100,
        **case,
    }
    return spec.matching(**full)


def test_batch_to_rate() -> None:
    spec = parse(expect={1: 160.0, 32: 1050})
    assert spec.model is None
    assert [(e.batch_size, e.images_per_sec) for e in spec.expectations] == [
        (1, 160.0),
        (32, 1050.0),
    ]
    e = spec.expectations[1]
    assert isinstance(e.images_per_sec, float)
    assert (e.hardware, e.tolerance, e.model, e.mode, e.dtype) == ("*", None, None, None, None)
    # No model: applies to any model of the test.
    assert match(spec, model="anything") == [e]
    assert match(spec, batch_size=8) == []


def test_model_to_batch_to_rate() -> None:
    spec = parse(expect={"resnet50_v1": {32: 190.0}, "vgg16": {1: 20.0, 32: 50.0}})
    got = {(e.model, e.batch_size): e.images_per_sec for e in spec.expectations}
    assert got == {("resnet50_v1", 32): 190.0, ("vgg16", 1): 20.0, ("vgg16", 32): 50.0}
    assert [e.images_per_sec for e in match(spec)] == [190.0]
    assert [e.images_per_sec for e in match(spec, model="vgg16")] == [50.0]
    assert match(spec, model="alexnet") == []


def test_model_kwarg_scopes_plain_table_and_names_the_cases() -> None:
    spec = parse(expect={32: 190.0}, model="resnet50_v1")
    assert spec.model == "resnet50_v1"
    assert spec.expectations[0].model == "resnet50_v1"
    assert match(spec, model="vgg16") == []
    assert len(match(spec)) == 1


def test_model_kwarg_agrees_with_model_table() -> None:
    spec = parse(expect={"resnet50_v1": {32: 190.0}}, model="resnet50_v1")
    assert spec.expectations[0].model == "resnet50_v1"


def test_positional_expect() -> None:
    assert parse({8: 100.0}) == parse(expect={8: 100.0})


def test_no_expectation_is_fine() -> None:
    spec = parse()
    assert spec == MarkerSpec()
    assert parse(model="m").model == "m"


def test_hardware_glob_is_case_insensitive_and_scoped() -> None:
    spec = parse(expect={32: 1000.0}, hardware="gpu-*V100*")
    assert spec.expectations[0].hardware == "gpu-*V100*"
    assert len(match(spec, hardware=V100)) == 1
    assert len(match(spec, hardware=V100.upper())) == 1
    assert match(spec, hardware=EPYC) == []
    assert match(spec, hardware="gpu-tesla-t4-x1") == []


def test_hardware_glob_is_a_full_match() -> None:
    spec = parse(expect={32: 1000.0}, hardware="gpu-*v100")
    assert match(spec, hardware=V100) == []  # V100 key continues after "v100"


@pytest.mark.parametrize(
    ("scope", "case", "applies"),
    [
        ({"mode": "training"}, {"mode": "training"}, True),
        ({"mode": "training"}, {"mode": "inference"}, False),
        ({"dtype": "float16"}, {"dtype": "float16"}, True),
        ({"dtype": "float16"}, {"dtype": "float32"}, False),
        ({"mode": "forward_backward", "dtype": "float16"}, {"mode": "forward_backward"}, False),
        ({}, {"mode": "training", "dtype": "float16"}, True),
    ],
)
def test_mode_and_dtype_scoping(scope: dict[str, str], case: dict[str, str], applies: bool) -> None:
    spec = parse(expect={32: 500.0}, **scope)
    assert bool(match(spec, **case)) is applies


@pytest.mark.parametrize("oom", ["OOM", None])
def test_oom_cells_are_skipped(oom: Any) -> None:
    spec = parse(expect={1: 10.0, 256: oom})
    assert [e.batch_size for e in spec.expectations] == [1]
    nested = parse(expect={"vgg16": {64: oom, 32: 12.0}})
    assert [e.batch_size for e in nested.expectations] == [32]


def test_floor_with_marker_tolerance() -> None:
    (e,) = parse(expect={32: 1000.0}, tolerance=0.1).expectations
    assert e.tolerance == 0.1
    assert e.floor(0.5) == pytest.approx(900.0)  # the marker's tolerance wins


def test_floor_with_default_tolerance() -> None:
    (e,) = parse(expect={32: 1000.0}).expectations
    assert e.floor(0.15) == pytest.approx(850.0)
    assert e.floor(0.0) == 1000.0


def test_zero_tolerance_is_allowed() -> None:
    (e,) = parse(expect={32: 1000.0}, tolerance=0).expectations
    assert e.tolerance == 0.0
    assert e.floor(0.15) == 1000.0


# ---- errors -------------------------------------------------------------------------------


def error(*args: Any, **kwargs: Any) -> str:
    with pytest.raises(MarkerError) as info:
        parse_marker(args, kwargs)
    return str(info.value)


def test_marker_error_is_a_value_error() -> None:
    assert issubclass(MarkerError, ValueError)


def test_unknown_kwarg() -> None:
    msg = error(expect={1: 1.0}, hardwre="gpu-*", batch=3)
    assert "unknown argument(s) batch, hardwre" in msg
    assert "allowed:" in msg and "hardware" in msg and "tolerance" in msg


def test_two_positionals() -> None:
    assert "at most one positional argument" in error({1: 1.0}, {2: 2.0})
    assert "got 2" in error({1: 1.0}, {2: 2.0})


def test_positional_and_keyword_expect() -> None:
    assert "both positionally and by keyword" in error({1: 1.0}, expect={2: 2.0})


@pytest.mark.parametrize("batch", [0, -4, True, 2.0])
def test_bad_batch(batch: Any) -> None:
    msg = error(expect={batch: 100.0})
    assert "batch size must be a positive int" in msg
    assert repr(batch) in msg


def test_bad_batch_inside_model_table() -> None:
    msg = error(expect={"resnet50_v1": {"8": 100.0}})
    assert "expect['resnet50_v1']" in msg
    assert "batch size must be a positive int, got '8'" in msg


def test_string_batch_in_plain_table_is_read_as_a_model_without_a_table() -> None:
    msg = error(expect={"8": 100.0})
    assert "expect['8'] must map batch size -> images/sec" in msg
    assert "100.0" in msg


@pytest.mark.parametrize("batch", [0, True])
def test_bad_batch_is_an_error_even_on_an_oom_cell(batch: Any) -> None:
    assert "batch size must be a positive int" in error(expect={batch: "OOM"})


@pytest.mark.parametrize("rate", [-1, 0, float("nan"), float("inf"), "fast", True, [100.0]])
def test_bad_rate(rate: Any) -> None:
    msg = error(expect={32: rate})
    assert "expect[32]" in msg
    assert "images/sec must be" in msg
    assert repr(rate) in msg


@pytest.mark.parametrize("tolerance", [-0.1, 1, 1.5, "0.1", True, float("nan")])
def test_bad_tolerance(tolerance: Any) -> None:
    msg = error(expect={32: 100.0}, tolerance=tolerance)
    assert "tolerance must be a fraction in [0, 1)" in msg
    assert repr(tolerance) in msg


@pytest.mark.parametrize("hardware", ["", None, 3])
def test_bad_hardware(hardware: Any) -> None:
    assert "hardware must be a non-empty glob pattern" in error(expect={1: 1.0}, hardware=hardware)


def test_bad_mode() -> None:
    msg = error(expect={1: 1.0}, mode="train")
    assert "mode must be one of inference, training, forward_backward" in msg
    assert "'train'" in msg


def test_bad_dtype() -> None:
    msg = error(expect={1: 1.0}, dtype="fp16")
    assert "dtype must be one of float32, float16" in msg
    assert "'fp16'" in msg


@pytest.mark.parametrize("model", ["", 5, "resnet/50", "resnet\n50"])
def test_bad_model(model: Any) -> None:
    assert "model: a model label must" in error(model=model)


def test_mixed_keys() -> None:
    assert "mixes model names and batch sizes" in error(expect={"resnet50_v1": {1: 1.0}, 32: 5.0})


def test_model_mismatch() -> None:
    msg = error(expect={"vgg16": {32: 50.0}}, model="resnet50_v1")
    assert "'vgg16'" in msg and "'resnet50_v1'" in msg


@pytest.mark.parametrize("expect", [{}, [(1, 2.0)], 100.0, "fast"])
def test_expect_not_a_non_empty_dict(expect: Any) -> None:
    assert "expect must be a non-empty dict" in error(expect=expect)


def test_model_table_that_is_not_a_dict() -> None:
    assert "expect['vgg16'] must map batch size -> images/sec" in error(expect={"vgg16": 50.0})


# ---- merge --------------------------------------------------------------------------------


def test_merge_keeps_every_expectation_and_the_closest_model() -> None:
    closest = parse(expect={32: 1000.0}, hardware="gpu-*v100*")
    further = parse(expect={32: 100.0}, hardware="cpu-*", model="resnet50_v1")
    furthest = parse(model="ignored")
    merged = merge([closest, further, furthest])
    assert merged.expectations == closest.expectations + further.expectations
    assert merged.model == "resnet50_v1"  # first marker that names one
    assert [e.images_per_sec for e in match(merged, hardware=V100)] == [1000.0]
    assert [e.images_per_sec for e in match(merged, hardware=EPYC)] == [100.0]


def test_merge_prefers_the_closest_model() -> None:
    merged = merge([parse(model="a"), parse(model="b")])
    assert merged.model == "a"


def test_merge_of_nothing() -> None:
    assert merge([]) == MarkerSpec()
