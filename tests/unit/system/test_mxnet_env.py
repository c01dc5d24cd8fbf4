"""Issue 49 item 4: MXNet's integer environment variables are checked before MXNet is imported
(a value it cannot read aborted the session with exit 134), without importing MXNet here."""

from __future__ import annotations

import pytest

from pytest_mxperf.config import parsers
from pytest_mxperf.system import mxnet_env, mxnet_import
from pytest_mxperf.system.mxnet_import import MXNetUnavailable


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"MXNET_CPU_WORKER_NTHREADS": "abc"}, "MXNET_CPU_WORKER_NTHREADS='abc'"),
        ({"MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN": "abc"}, "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN"),
        ({"OMP_NUM_THREADS": "99999999999999999999"}, "OMP_NUM_THREADS='99999999999999999999'"),
        ({"OMP_NUM_THREADS": "4097"}, "in [1, 4096]"),
        ({"MXNET_CPU_PRIORITY_NTHREADS": "-5"}, "MXNET_CPU_PRIORITY_NTHREADS='-5'"),
        ({"MXNET_GPU_MEM_POOL_RESERVE": "101"}, "in [0, 100]"),
        ({"MXNET_KVSTORE_BIGARRAY_BOUND": "1e6"}, "MXNET_KVSTORE_BIGARRAY_BOUND='1e6'"),
        ({"MXNET_CPU_WORKER_NTHREADS": "\u0664"}, "MXNET_CPU_WORKER_NTHREADS"),  # Arabic-Indic 4
    ],
)
def test_an_integer_variable_mxnet_cannot_take_is_named_with_its_range(
    env: dict[str, str], named: str
) -> None:
    problem = mxnet_env.env_problem(env)
    assert problem is not None and named in problem
    assert "whole number in [" in problem


@pytest.mark.parametrize(
    "env",
    [
        {"MXNET_CPU_WORKER_NTHREADS": "2", "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN": "0"},
        {"MXNET_MKLDNN_CACHE_NUM": "-1", "MXNET_MP_OPENCV_NUM_THREADS": "0"},
        {"OMP_NUM_THREADS": "4096", "MXNET_CPU_PRIORITY_NTHREADS": " 4 "},
        {"MXNET_KVSTORE_BIGARRAY_BOUND": "1000000", "MXNET_CPU_WORKER_NTHREADS": ""},
        {"MXNET_ENGINE_TYPE": "NaiveEngine", "MXNET_SUBGRAPH_BACKEND": "NONE"},  # not ints
    ],
)
def test_values_mxnet_reads_pass(env: dict[str, str]) -> None:
    assert mxnet_env.env_problem(env) is None


def test_import_mxnet_refuses_the_variable_before_importing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ranks, scripts and fork servers import MXNet through `import_mxnet`: the same check."""
    monkeypatch.setenv("MXNET_CPU_WORKER_NTHREADS", "abc")
    with pytest.raises(MXNetUnavailable, match="MXNET_CPU_WORKER_NTHREADS='abc'"):
        mxnet_import.import_mxnet()


@pytest.mark.parametrize("text", ["0", "4097", "99999999"])
def test_the_threads_option_is_bounded(text: str) -> None:
    with pytest.raises(ValueError, match=r"\[1, 4096\]"):
        parsers.thread_count(text)
