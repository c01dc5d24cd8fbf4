"""Issue 49 item 4: MXNet's integer environment variables are checked before MXNet is imported
(a value it cannot read aborted the session with exit 134), without importing MXNet here."""

from __future__ import annotations

from typing import Callable

import pytest

from pytest_mxperf.config import parsers
from pytest_mxperf.system import mxnet_env, mxnet_import, mxnet_variables
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


@pytest.mark.parametrize("load", [mxnet_import.import_mxnet, mxnet_import.load_library])
def test_import_mxnet_refuses_the_variable_before_importing(
    monkeypatch: pytest.MonkeyPatch, load: Callable[[], object]
) -> None:
    """Ranks, scripts and fork servers import MXNet through `import_mxnet` (a data-parallel
    case's scheduler and summing servers load its library through `load_library`): the same
    check."""
    monkeypatch.setenv("MXNET_CPU_WORKER_NTHREADS", "abc")
    with pytest.raises(MXNetUnavailable, match="MXNET_CPU_WORKER_NTHREADS='abc'"):
        load()


@pytest.mark.parametrize("text", ["0", "4097", "99999999"])
def test_the_threads_option_is_bounded(text: str) -> None:
    with pytest.raises(ValueError, match=r"\[1, 4096\]"):
        parsers.thread_count(text)


#: Every variable MXNet 1.9.1's docs/static_site/src/pages/api/faq/env_var.md gives as
#: "Values: Int" (read off the page at tag 1.9.1).
DOCUMENTED_INT = {
    "DMLC_LOG_STACK_TRACE_DEPTH",
    "MXNET_CPU_NNPACK_NTHREADS",
    "MXNET_CPU_PARALLEL_RAND_COPY",
    "MXNET_CPU_PARALLEL_SIZE",
    "MXNET_CPU_PRIORITY_NTHREADS",
    "MXNET_CPU_TEMP_COPY",
    "MXNET_CPU_WORKER_NTHREADS",
    "MXNET_CUDA_GRAPHS_MAX_LOG_ENTRIES",
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN",
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD",
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD",
    "MXNET_EXEC_NUM_TEMP",
    "MXNET_GPU_COPY_NTHREADS",
    "MXNET_GPU_CUDNN_DROPOUT_STATE_COPY",
    "MXNET_GPU_MEM_LARGE_ALLOC_ROUND_SIZE",
    "MXNET_GPU_MEM_POOL_RESERVE",
    "MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF",
    "MXNET_GPU_PARALLEL_RAND_COPY",
    "MXNET_GPU_TEMP_COPY",
    "MXNET_GPU_WORKER_NTHREADS",
    "MXNET_KVSTORE_BIGARRAY_BOUND",
    "MXNET_KVSTORE_REDUCTION_NTHREADS",
    "MXNET_KVSTORE_SLICE_THRESHOLD",
    "MXNET_KVSTORE_TREE_ARRAY_BOUND",
    "MXNET_MKLDNN_CACHE_NUM",
    "MXNET_MP_OPENCV_NUM_THREADS",
    "MXNET_MP_WORKER_NTHREADS",
    "MXNET_OPTIMIZER_AGGREGATION_SIZE",
    "NNVM_EXEC_MATCH_RANGE",
}


def test_every_integer_variable_mxnet_documents_is_checked() -> None:
    assert DOCUMENTED_INT - set(mxnet_env.INT_VARIABLES) == set()


def test_the_checked_variables_that_change_speed_are_recorded_with_results() -> None:
    # One list of names behind both: an integer MXNet variable that is checked before the
    # import but never recorded (or the other way round) is a list written twice.
    logging = {"MXNET_CUDA_GRAPHS_MAX_LOG_ENTRIES", "DMLC_LOG_STACK_TRACE_DEPTH"}
    checked = set(mxnet_env.INT_VARIABLES) - logging - {"OMP_NUM_THREADS"}
    assert checked - mxnet_variables.PERF_VARIABLES == set()
    assert (DOCUMENTED_INT - logging) - mxnet_variables.PERF_VARIABLES == set()
