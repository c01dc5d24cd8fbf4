"""Issue 29 (reliability, round 3): the pure parts of its fixes."""

from __future__ import annotations

import pytest

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
