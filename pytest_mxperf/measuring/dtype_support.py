"""Which dtypes a device can run: float16 never on CPU, bfloat16 only with the CPU flags for it."""

from __future__ import annotations

import re
from pathlib import Path

FP16_CPU_REASON = (
    "float16 on CPU: MXNet 1.9 has no float16 GEMM on CPU (benchmark_score skips it too)"
)
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(path: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first CPU's feature flags (empty where /proc/cpuinfo is missing)."""
    try:
        text = path.read_text()
    except OSError:
        return frozenset()
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    return frozenset(match.group(1).split()) if match else frozenset()


def unsupported_dtype(
    dtype: str, kind: str, mode: str, *, flags: frozenset[str], features: str
) -> str | None:
    """Why ``dtype`` cannot be measured on ``kind`` in ``mode`` here (None: it can).

    :param flags: the CPU's flags (`cpu_flags`); :param features: MXNet's enabled build
        features, comma-separated (``software()["mxnet_features"]``)."""
    if dtype == "float16" and kind == "cpu":
        return FP16_CPU_REASON
    if dtype not in ("amp", "bfloat16"):
        return None
    if mode != "inference":
        return (
            f"{dtype} {mode}: AMP training needs amp.init() before the network is built, which "
            "changes every later case of the process; only AMP inference is measured"
        )
    if dtype == "amp" and kind == "cpu":
        return "amp (float16 mixed precision) on CPU: MXNet 1.9 has no float16 GEMM on CPU"
    if dtype == "bfloat16" and kind != "cpu":
        return "bfloat16 AMP in MXNet 1.9 runs through oneDNN on CPU only"
    if dtype == "bfloat16":
        if "MKLDNN" not in features.split(","):
            return "bfloat16 on CPU needs MXNet built with oneDNN (MKLDNN feature off)"
        if not flags & set(BF16_FLAGS):
            return (
                "bfloat16 on this CPU: no avx512_bf16 or amx_bf16 flag in /proc/cpuinfo, so "
                "oneDNN would emulate bfloat16 (slower than float32, nothing worth measuring)"
            )
    return None
