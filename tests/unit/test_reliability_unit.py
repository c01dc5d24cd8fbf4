"""Issue 29 (reliability, round 3): the pure parts of its fixes."""

from __future__ import annotations

import pytest

from pytest_mxperf.config import options, parsers
from pytest_mxperf.system import fingerprint


# Item 14: MXNet aborts the process (dmlc::ParamError, exit 134) on a thread variable that is
# not an int; OpenMP ignores one that is not positive.
@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OMP_NUM_THREADS": "abc"}, "OMP_NUM_THREADS='abc'"),
        ({"OMP_NUM_THREADS": "4,2"}, "OMP_NUM_THREADS='4,2'"),
        ({"OMP_NUM_THREADS": "2.5"}, "OMP_NUM_THREADS='2.5'"),
        ({"OMP_NUM_THREADS": "0"}, "OMP_NUM_THREADS='0'"),
        ({"OMP_NUM_THREADS": "-1"}, "OMP_NUM_THREADS='-1'"),
        ({"MXNET_OMP_MAX_THREADS": "abc"}, "MXNET_OMP_MAX_THREADS='abc'"),
    ],
)
def test_a_thread_variable_mxnet_cannot_read_is_named(env: dict[str, str], named: str) -> None:
    problem = fingerprint.thread_env_problem(env)
    assert problem is not None and named in problem
    assert "positive integer" in problem


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OMP_NUM_THREADS": "4"},
        {"OMP_NUM_THREADS": " 2 "},
        {"OMP_NUM_THREADS": ""},
        {"MXNET_OMP_MAX_THREADS": "8"},
    ],
)
def test_thread_variables_mxnet_reads_pass(env: dict[str, str]) -> None:
    assert fingerprint.thread_env_problem(env) is None


# Item 15: --mxperf-pipeline-timeout inf was accepted, then every pipeline case failed with
# "OverflowError: timestamp out of range for platform time_t".
@pytest.mark.parametrize("text", ["inf", "Infinity", "nan", "-inf", "1e300", "604801", "0", "-1"])
def test_seconds_refuse_non_finite_and_absurd_values(text: str) -> None:
    with pytest.raises(ValueError, match="seconds"):
        parsers.positive_seconds(text)


@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), ("60", 60.0), ("604800", 604800.0)])
def test_seconds_take_finite_positive_values(text: str, value: float) -> None:
    assert parsers.positive_seconds(text) == value


def test_every_seconds_option_uses_the_seconds_parser() -> None:
    timed = [s.name for s in options.SPECS if s.metavar == "SECONDS"]
    assert "pipeline_timeout" in timed and "dist_timeout" in timed
    assert all(s.parse is parsers.positive_seconds for s in options.SPECS if s.name in timed)


@pytest.mark.parametrize("text", ["inf", "nan"])
def test_a_positive_float_is_finite(text: str) -> None:
    with pytest.raises(ValueError, match="finite"):
        parsers.positive_float(text)
