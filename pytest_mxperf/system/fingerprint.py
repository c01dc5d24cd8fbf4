"""Hardware keys, the thread setting in force and the performance environment (no MXNet import).

The hardware key is what throughput depends on physically, as a readable slug:
``cpu-<cpu model>-<usable logical cores>c`` for CPU cases and ``gpu-<gpu model>-x<count>`` for
GPU cases. Software versions and environment variables are recorded, not keyed.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import platform
import re
import socket
import subprocess
from collections.abc import Mapping
from typing import Any

from pytest_mxperf.system import malloc, mxnet_variables

#: Environment variables that change MXNet throughput; recorded with every result. The
#: settings of the OpenMP, MKL, oneDNN and OpenBLAS runtimes by prefix; MXNet's own only by name
#: (`mxnet_variables.PERF_VARIABLES`): any other ``MXNET_*`` variable (a token a CI job names
#: MXNET_SECRET_TOKEN) never reaches a committed baseline.
PERF_ENV_PREFIXES = ("OMP_", "KMP_", "GOMP_", "MKL_", "DNNL_", "MKLDNN_", "OPENBLAS_", "MALLOC_")
#: glibc's tunables include its allocator's (`malloc`), which moves an input pipeline's speed.
PERF_ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "TF32_OVERRIDE",
    "GLIBC_TUNABLES",
)
#: Names that say their value is a secret: never stored, whatever the prefix.
_SECRET_NAME = re.compile(
    r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|KEY|KEYS|APIKEY|CREDENTIALS?|AUTH|PRIVATE|"
    r"COOKIE|SESSION|SIGNATURE|CERT)(_|$)"
)


def slug(text: str) -> str:
    """``"Intel(R) Xeon(R) Platinum 8124M CPU @ 3.00GHz"`` ->
    ``"intel-xeon-platinum-8124m-cpu-3-00ghz"``."""
    text = re.sub(r"\((r|tm)\)", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


def cpu_model(cpuinfo: str | None = None) -> str:
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                cpuinfo = fh.read()
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def usable_cpus() -> int:
    """Logical CPUs this process may run on (respects affinity masks and cgroup cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_key(model: str | None = None, cores: int | None = None) -> str:
    return f"cpu-{slug(model or cpu_model())}-{cores or usable_cpus()}c"


def gpu_key(name: str, count: int = 1) -> str:
    return f"gpu-{slug(name)}-x{count}"


def hardware_key(
    kind: str, *, machine: str | None, cpu: str, gpu_name: str | None, gpu_count: int = 1
) -> str:
    """The key a case is stored under; ``machine`` (``--mxperf-machine``) replaces detection."""
    if kind == "cpu":
        return machine or cpu
    if machine:
        return f"{machine}-gpu-x{gpu_count}"
    return gpu_key(gpu_name or "unknown-gpu", gpu_count)


def visible_gpu_ids(env: Mapping[str, str]) -> list[str] | None:
    """The CUDA_VISIBLE_DEVICES list (indices or UUIDs), or None when unrestricted."""
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    ids = []
    for part in raw.split(","):
        part = part.strip()
        if not part or part == "-1":
            break  # CUDA stops at the first invalid entry
        ids.append(part)
    return ids


def parse_nvidia_smi(text: str) -> list[dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader``."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            gpus.append({"index": parts[0], "uuid": parts[1], "name": ",".join(parts[2:])})
    return gpus


def visible_gpus(env: Mapping[str, str], smi_output: str | None = None) -> list[dict[str, str]]:
    """GPUs a CUDA process sees, in CUDA order: nvidia-smi rows filtered by CUDA_VISIBLE_DEVICES
    (`pytest_mxperf.system.nvml.visible_gpus` asks NVML first and falls back here)."""
    if smi_output is None:
        try:
            smi_output = subprocess.run(
                ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return []
    gpus = parse_nvidia_smi(smi_output)
    ids = visible_gpu_ids(env)
    if ids is None:
        return gpus
    chosen = []
    for ident in ids:
        for gpu in gpus:
            if ident == gpu["index"] or (
                ident.startswith("GPU-") and gpu["uuid"].startswith(ident)
            ):
                chosen.append(gpu)
                break
        else:
            break  # an index or UUID no device has is invalid: CUDA stops there too
    return chosen


def gpu_for_worker(worker_id: str | None, n_visible: int) -> int:
    """Which visible GPU an xdist worker uses: worker ``gwN`` -> GPU ``N mod n_visible``."""
    if n_visible <= 0:
        raise ValueError("no GPU is visible")
    if not worker_id or not worker_id.startswith("gw"):
        return 0
    try:
        return int(worker_id[2:]) % n_visible
    except ValueError:
        return 0


def machine_id(
    paths: tuple[str, ...] = ("/etc/machine-id", "/var/lib/dbus/machine-id"),
) -> str | None:
    """An anonymous id of this machine (host or VM): a salted hash of the OS machine id, so
    stored runs can say "measured on another machine" without storing the id, host or user
    name. None where the OS has no machine id."""
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                raw = fh.read().strip()
        except OSError:
            continue
        if raw:
            return hashlib.sha256(f"pytest-mxperf:{raw}".encode()).hexdigest()[:12]
    return None


#: Names of variables whose value is a place, not a setting (MXNET_HOME, MXNET_LIBRARY_PATH,
#: MXNET_PROFILER_FILENAME, KMP_..._FILE ...).
_PLACE_NAME = re.compile(r"(HOME|PATH|PATHS|DIR|DIRS|FILE|FILENAME|ROOT|PREFIX|URI|URL|HOST)$")
#: What a baseline stores instead of a path, or of a value naming this user or host: baseline
#: files are committed, and neither changes throughput.
PATH_VALUE = "<path>"
PRIVATE_VALUE = "<set>"


#: What a baseline stores instead of a value whose name says it is a secret.
SECRET_VALUE = "<redacted>"


def private_names() -> tuple[str, ...]:
    """This user's and host's names, never to be stored (lower case; short ones too: see
    `names_private`)."""
    names = [platform.node(), socket.gethostname()]
    with contextlib.suppress(Exception):  # no passwd entry in some containers
        names.append(getpass.getuser())
    return tuple({n.lower() for n in names if n})


def names_private(value: str, private: tuple[str, ...]) -> bool:
    """Whether ``value`` holds one of the ``private`` names: anywhere for names of 3 or more
    characters, as a whole word for shorter ones (a host ``db`` is in ``db:5000``, not in
    ``dbl``)."""
    text = value.lower()
    for name in private:
        if len(name) >= 3 and name in text:
            return True
        if name and re.search(rf"(?<![a-z0-9]){re.escape(name)}(?![a-z0-9])", text):
            return True
    return False


def is_perf_variable(name: str) -> bool:
    """Whether the variable ``name`` shapes MXNet's throughput (see `PERF_ENV_PREFIXES`)."""
    return (
        name in mxnet_variables.PERF_VARIABLES
        or name in PERF_ENV_NAMES
        or name.startswith(PERF_ENV_PREFIXES)
    )


def perf_environment(
    env: Mapping[str, str], private: tuple[str, ...] | None = None
) -> dict[str, str]:
    """The environment variables that shape throughput (`is_perf_variable`), as set in this
    process, with secrets, paths and values naming this user or host replaced (`SECRET_VALUE`,
    `PATH_VALUE`, `PRIVATE_VALUE`): thread counts and MXNet's numeric or enum settings are kept
    as they are."""
    private = private_names() if private is None else private
    recorded = {}
    for name, value in sorted(env.items()):
        if not is_perf_variable(name):
            continue
        if name == malloc.VARIABLE:
            value = malloc.users_part(value)  # the plugin's own tunables are no user setting
            if not value:
                continue
        if _SECRET_NAME.search(name):
            value = SECRET_VALUE
        elif _PLACE_NAME.search(name) or "/" in value or "\\" in value or value.startswith("~"):
            value = PATH_VALUE
        elif names_private(value, private):
            value = PRIVATE_VALUE
        recorded[name] = value
    return recorded


def threads_in_force(
    env: Mapping[str, str], cpus: int | None = None, machine: str | None = None
) -> dict[str, Any]:
    """MXNet's OpenMP thread count as ``src/engine/openmp.cc`` decides it, and why.

    OMP_NUM_THREADS wins (MXNet then uses OpenMP's own count); else MXNET_OMP_MAX_THREADS caps
    the usable logical CPUs; else the usable logical CPUs, halved on x86 (MXNet assumes
    hyper-threading).
    """
    cpus = cpus or usable_cpus()
    arch = (machine or platform.machine()).lower()
    record: dict[str, Any] = {
        "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS"),
        "MXNET_OMP_MAX_THREADS": env.get("MXNET_OMP_MAX_THREADS"),
        "usable_cpus": cpus,
    }
    if env.get("OMP_NUM_THREADS", "").split(",")[0].strip().isdigit():
        record["omp_threads"] = int(env["OMP_NUM_THREADS"].split(",")[0])
        record["source"] = "OMP_NUM_THREADS"
    elif env.get("MXNET_OMP_MAX_THREADS", "").strip().isdigit():
        record["omp_threads"] = max(1, min(cpus, int(env["MXNET_OMP_MAX_THREADS"])))
        record["source"] = "MXNET_OMP_MAX_THREADS (capped at the usable CPUs)"
    else:
        x86 = arch in ("x86_64", "amd64", "i386", "i686", "x86")
        record["omp_threads"] = max(1, cpus // 2) if x86 else cpus
        record["source"] = "MXNet default (half the usable CPUs on x86)" if x86 else "MXNet default"
    return record


def apply_threads(env: Any, threads: int) -> None:
    """Set the thread count for MXNet; must run before ``import mxnet`` to take effect."""
    env["OMP_NUM_THREADS"] = str(threads)
    env["MXNET_OMP_MAX_THREADS"] = str(threads)


_HARDWARE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_hardware_key(key: str) -> str:
    """A hardware key names a folder of baselines: letters, digits, '.', '_', '-' (ValueError)."""
    if not _HARDWARE_KEY.match(key):
        raise ValueError(f"invalid hardware key {key!r}: use letters, digits, '.', '_', '-'")
    return key
