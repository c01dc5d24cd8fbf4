"""MXNet's integer environment variables, checked before MXNet is imported.

MXNet reads these with ``dmlc::GetEnv`` as an ``int``: a value it cannot parse aborts the
process (``dmlc::ParamError``, "Fatal Python error: Aborted", exit 134, no table), an absurd
thread count aborts it when the thread pools are made, and a negative pool size comes back as a
misleading error later (``MXNET_CPU_PRIORITY_NTHREADS=-5`` read as out of memory). The names and
meanings are those of MXNet 1.9.1's ``docs/static_site/src/pages/api/faq/env_var.md`` (and
``src/engine/openmp.cc`` for ``MXNET_OMP_MAX_THREADS``).

Bounds: a thread or resource count is 1..`MAX_THREADS` (4096): well above the logical CPUs of
any machine MXNet 1.9 runs on (the largest x86 servers have a few hundred), while a larger count
only makes MXNet start that many threads, or fail to, before the first batch. Sizes and node
counts are bounded by the C ``int`` MXNet parses them into; a percentage by 100; the other
ranges are the documented ones.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The most threads (or per-thread resources) a variable may ask for: see the module docstring.
MAX_THREADS = 4096
#: The largest value of a C ``int``, which MXNet parses these variables into.
INT_MAX = 2**31 - 1

_COUNT = (1, MAX_THREADS)
_SIZE = (0, INT_MAX)

#: Variable name -> (lowest, highest) accepted value, both inclusive.
INT_VARIABLES: dict[str, tuple[int, int]] = {
    # threads (OMP_NUM_THREADS is read by OpenMP, and by MXNet at load to size its pool)
    "OMP_NUM_THREADS": _COUNT,
    "MXNET_OMP_MAX_THREADS": _COUNT,
    "MXNET_GPU_WORKER_NTHREADS": _COUNT,
    "MXNET_GPU_COPY_NTHREADS": _COUNT,
    "MXNET_CPU_WORKER_NTHREADS": _COUNT,
    "MXNET_CPU_PRIORITY_NTHREADS": _COUNT,
    "MXNET_CPU_NNPACK_NTHREADS": _COUNT,
    "MXNET_MP_WORKER_NTHREADS": _COUNT,
    "MXNET_MP_OPENCV_NUM_THREADS": (0, MAX_THREADS),  # < 1 turns OpenCV threads off
    "MXNET_KVSTORE_REDUCTION_NTHREADS": _COUNT,
    "MXNET_USE_NUM_CORES_OPERATOR_TUNING": _COUNT,
    "MXNET_GPU_WORKER_NSTREAMS": (1, 2),
    # memory
    "NNVM_EXEC_MATCH_RANGE": (0, MAX_THREADS),  # MXNet tries every value in [1, N]
    "MXNET_EXEC_NUM_TEMP": _COUNT,
    "MXNET_GPU_MEM_POOL_RESERVE": (0, 100),  # a percentage
    "MXNET_GPU_MEM_POOL_ROUND_LINEAR_CUTOFF": (0, 62),  # a power of two of a byte count
    "MXNET_GPU_MEM_LARGE_ALLOC_ROUND_SIZE": (1, INT_MAX),
    "MXNET_CPU_TEMP_COPY": _COUNT,
    "MXNET_GPU_TEMP_COPY": _COUNT,
    "MXNET_CPU_PARALLEL_RAND_COPY": _COUNT,
    "MXNET_GPU_PARALLEL_RAND_COPY": _COUNT,
    "MXNET_GPU_CUDNN_DROPOUT_STATE_COPY": _COUNT,
    "MXNET_MKLDNN_CACHE_NUM": (-1, INT_MAX),  # -1: unbounded
    "MXNET_CPU_PARALLEL_SIZE": _SIZE,
    # execution and communication
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN": _SIZE,
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD": _SIZE,
    "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD": _SIZE,
    "MXNET_KVSTORE_BIGARRAY_BOUND": _SIZE,
    "MXNET_KVSTORE_TREE_ARRAY_BOUND": _SIZE,
    "MXNET_KVSTORE_SLICE_THRESHOLD": _SIZE,
    "MXNET_OPTIMIZER_AGGREGATION_SIZE": (0, 60),  # documented maximum 60
    "MXNET_CUDNN_AUTOTUNE_DEFAULT": (0, 2),
    # logging (not recorded with results: they change no speed)
    "MXNET_CUDA_GRAPHS_MAX_LOG_ENTRIES": _SIZE,
    "DMLC_LOG_STACK_TRACE_DEPTH": _SIZE,
}


def env_problem(env: Mapping[str, str]) -> str | None:
    """What is wrong with MXNet's integer variables in ``env``, or None.

    Unset or empty is fine (MXNet then takes its default). The message names the variable, its
    value and the accepted range.
    """
    for name, (low, high) in INT_VARIABLES.items():
        value = env.get(name, "")
        text = value.strip()
        if not text:
            continue
        number = _whole_number(text)
        if number is None or not low <= number <= high:
            return (
                f"{name}={value!r} is not a whole number in [{low}, {high}]: MXNet reads it as "
                "an int when it loads and aborts the process (or misbehaves) on anything else; "
                f"{_advice(name)}"
            )
    return None


def _whole_number(text: str) -> int | None:
    sign = text[:1] if text[:1] in "+-" else ""
    digits = text[len(sign) :]
    if not digits.isascii() or not digits.isdigit() or len(digits) > 20:
        return None
    return int(text)


def _advice(name: str) -> str:
    if name in ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS"):
        return "set it to a thread count such as 4, or unset it and pass --mxperf-threads N"
    return "set it within that range, or unset it for MXNet's default"
