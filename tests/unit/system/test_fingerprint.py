"""Hardware keys, visible GPUs, the thread count in force and the recorded environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mxperf.system import fingerprint as fp

CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Platinum 8124M CPU @ 3.00GHz
stepping\t: 4

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8124M CPU @ 3.00GHz
"""

SMI = """\
0, GPU-1111aaaa-0000-0000-0000-000000000000, Tesla V100-SXM2-16GB
1, GPU-2222bbbb-0000-0000-0000-000000000000, Tesla V100-SXM2-16GB
2, GPU-3333cccc-0000-0000-0000-000000000000, NVIDIA A100-SXM4-40GB
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Intel(R) Xeon(R) Platinum 8124M CPU @ 3.00GHz", "intel-xeon-platinum-8124m-cpu-3-00ghz"),
        ("AMD EPYC 7R13 Processor", "amd-epyc-7r13-processor"),
        ("Intel(TM) Core(tm) i7", "intel-core-i7"),
        ("Tesla V100-SXM2-16GB", "tesla-v100-sxm2-16gb"),
        ("  --weird__name!! ", "weird-name"),
        ("", "unknown"),
        ("(R)(TM)", "unknown"),
    ],
)
def test_slug(text: str, expected: str) -> None:
    assert fp.slug(text) == expected


def test_cpu_model_from_cpuinfo() -> None:
    assert fp.cpu_model(CPUINFO) == "Intel(R) Xeon(R) Platinum 8124M CPU @ 3.00GHz"


def test_cpu_model_ignores_the_numeric_model_line() -> None:
    # "model\t\t: 85" comes first on x86 but is not a name.
    text = "model\t\t: 85\nmodel name\t: AMD EPYC 7R13 Processor\n"
    assert fp.cpu_model(text) == "AMD EPYC 7R13 Processor"


def test_cpu_model_of_arm_style_cpuinfo() -> None:
    assert fp.cpu_model("processor\t: 0\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n") == (
        "Raspberry Pi 4 Model B Rev 1.4"
    )


def test_cpu_model_falls_back_to_platform() -> None:
    model = fp.cpu_model("processor\t: 0\nmodel name\t:   \n")
    assert isinstance(model, str) and model


def test_cpu_key() -> None:
    assert fp.cpu_key("AMD EPYC 7R13 Processor", 2) == "cpu-amd-epyc-7r13-processor-2c"
    assert fp.cpu_key("x", None) == f"cpu-x-{fp.usable_cpus()}c"


def test_usable_cpus_is_positive() -> None:
    assert fp.usable_cpus() >= 1


def test_gpu_key() -> None:
    assert fp.gpu_key("Tesla V100-SXM2-16GB") == "gpu-tesla-v100-sxm2-16gb-x1"
    assert fp.gpu_key("NVIDIA A100-SXM4-40GB", 8) == "gpu-nvidia-a100-sxm4-40gb-x8"


def test_hardware_key() -> None:
    cpu = "cpu-amd-epyc-2c"
    assert fp.hardware_key("cpu", machine=None, cpu=cpu, gpu_name=None) == cpu
    assert fp.hardware_key("cpu", machine="fleet-a", cpu=cpu, gpu_name="V100") == "fleet-a"
    assert (
        fp.hardware_key("gpu", machine=None, cpu=cpu, gpu_name="Tesla V100-SXM2-16GB")
        == "gpu-tesla-v100-sxm2-16gb-x1"
    )
    assert (
        fp.hardware_key("gpu", machine="fleet-a", cpu=cpu, gpu_name="V100", gpu_count=2)
        == "fleet-a-gpu-x2"
    )
    assert fp.hardware_key("gpu", machine=None, cpu=cpu, gpu_name=None) == "gpu-unknown-gpu-x1"


def test_parse_nvidia_smi() -> None:
    rows = fp.parse_nvidia_smi(SMI + "garbage line\n")
    assert [r["index"] for r in rows] == ["0", "1", "2"]
    assert rows[2] == {
        "index": "2",
        "uuid": "GPU-3333cccc-0000-0000-0000-000000000000",
        "name": "NVIDIA A100-SXM4-40GB",
    }


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        (None, None),
        ("1,0", ["1", "0"]),
        (" 2 , 0 ", ["2", "0"]),
        ("", []),
        ("-1", []),
        ("0,-1,1", ["0"]),
        ("0,,1", ["0"]),
        ("GPU-2222bbbb", ["GPU-2222bbbb"]),
    ],
)
def test_visible_gpu_ids(value: str | None, ids: list[str] | None) -> None:
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    assert fp.visible_gpu_ids(env) == ids


def names(env: dict[str, str]) -> list[str]:
    return [g["index"] for g in fp.visible_gpus(env, SMI)]


def test_visible_gpus_unrestricted() -> None:
    assert names({}) == ["0", "1", "2"]


def test_visible_gpus_in_cuda_order() -> None:
    assert names({"CUDA_VISIBLE_DEVICES": "1,0"}) == ["1", "0"]


def test_visible_gpus_by_uuid_prefix() -> None:
    assert names({"CUDA_VISIBLE_DEVICES": "GPU-3333cccc"}) == ["2"]
    assert names({"CUDA_VISIBLE_DEVICES": "GPU-2222bbbb-0000-0000-0000-000000000000,0"}) == [
        "1",
        "0",
    ]


def test_visible_gpus_none() -> None:
    assert names({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert names({"CUDA_VISIBLE_DEVICES": "-1"}) == []


def test_visible_gpus_stop_at_the_first_invalid_entry() -> None:
    assert names({"CUDA_VISIBLE_DEVICES": "0,-1,1"}) == ["0"]
    # An index or UUID no device has is invalid too: CUDA stops there as well.
    assert names({"CUDA_VISIBLE_DEVICES": "2,7,1"}) == ["2"]
    assert names({"CUDA_VISIBLE_DEVICES": "1,GPU-ffff,0"}) == ["1"]


def test_visible_gpus_without_nvidia_smi_output() -> None:
    assert fp.visible_gpus({}, "") == []


@pytest.mark.parametrize(
    ("worker", "n", "gpu"),
    [
        ("gw0", 2, 0),
        ("gw1", 2, 1),
        ("gw2", 2, 0),
        ("gw3", 2, 1),
        ("gw4", 2, 0),
        ("gw5", 2, 1),
        ("gw0", 3, 0),
        ("gw1", 3, 1),
        ("gw2", 3, 2),
        ("gw3", 3, 0),
        ("gw4", 3, 1),
        ("gw5", 3, 2),
        (None, 3, 0),
        ("master", 3, 0),
        ("gwx", 3, 0),
        ("gw7", 1, 0),
    ],
)
def test_gpu_for_worker(worker: str | None, n: int, gpu: int) -> None:
    assert fp.gpu_for_worker(worker, n) == gpu


@pytest.mark.parametrize("worker", ["gw0", None, "master"])
def test_gpu_for_worker_without_gpus(worker: str | None) -> None:
    with pytest.raises(ValueError, match="no GPU is visible"):
        fp.gpu_for_worker(worker, 0)


def test_perf_environment() -> None:
    env = {
        "MXNET_CUDNN_AUTOTUNE_DEFAULT": "0",
        "OMP_NUM_THREADS": "4",
        "KMP_AFFINITY": "granularity=fine",
        "DNNL_VERBOSE": "0",
        "CUDA_VISIBLE_DEVICES": "0",
        "HOME": "/root",
        "PATH": "/usr/bin",
        "CUDA_HOME": "/usr/local/cuda",
        "MY_MXNET_THING": "1",
    }
    got = fp.perf_environment(env)
    assert got == {
        "CUDA_VISIBLE_DEVICES": "0",
        "DNNL_VERBOSE": "0",
        "KMP_AFFINITY": "granularity=fine",
        "MXNET_CUDNN_AUTOTUNE_DEFAULT": "0",
        "OMP_NUM_THREADS": "4",
    }
    assert list(got) == sorted(got)


def test_threads_omp_num_threads_wins_over_mxnet_max() -> None:
    # src/engine/openmp.cc: with OMP_NUM_THREADS set, MXNet uses omp_get_max_threads().
    env = {"MXNET_OMP_MAX_THREADS": "3", "OMP_NUM_THREADS": "5"}
    got = fp.threads_in_force(env, cpus=16, machine="x86_64")
    assert got["omp_threads"] == 5
    assert got["source"] == "OMP_NUM_THREADS"
    assert got["OMP_NUM_THREADS"] == "5"
    assert got["MXNET_OMP_MAX_THREADS"] == "3"
    assert got["usable_cpus"] == 16


def test_threads_mxnet_omp_max_threads_caps_usable_cpus() -> None:
    got = fp.threads_in_force({"MXNET_OMP_MAX_THREADS": "3"}, cpus=16, machine="x86_64")
    assert got["omp_threads"] == 3 and got["source"].startswith("MXNET_OMP_MAX_THREADS")
    assert fp.threads_in_force({"MXNET_OMP_MAX_THREADS": "8"}, cpus=2)["omp_threads"] == 2


def test_threads_omp_num_threads_next() -> None:
    got = fp.threads_in_force({"OMP_NUM_THREADS": "5"}, cpus=16, machine="x86_64")
    assert (got["omp_threads"], got["source"]) == (5, "OMP_NUM_THREADS")
    # nested OpenMP lists: the outer level counts
    assert fp.threads_in_force({"OMP_NUM_THREADS": "6,2"}, cpus=16)["omp_threads"] == 6


def test_threads_non_numeric_settings_are_ignored() -> None:
    env = {"MXNET_OMP_MAX_THREADS": "lots", "OMP_NUM_THREADS": " "}
    got = fp.threads_in_force(env, cpus=8, machine="x86_64")
    assert got["omp_threads"] == 4
    assert got["source"].startswith("MXNet default")


@pytest.mark.parametrize(
    ("machine", "cpus", "threads"),
    [
        ("x86_64", 16, 8),
        ("AMD64", 7, 3),
        ("x86_64", 1, 1),
        ("x86_64", 2, 1),
        ("aarch64", 16, 16),
        ("aarch64", 1, 1),
    ],
)
def test_threads_default(machine: str, cpus: int, threads: int) -> None:
    got = fp.threads_in_force({}, cpus=cpus, machine=machine)
    assert got["omp_threads"] == threads
    assert got["omp_threads"] >= 1
    assert got["source"].startswith("MXNet default")
    assert ("half" in got["source"]) is (machine != "aarch64")


def test_threads_default_uses_usable_cpus() -> None:
    got = fp.threads_in_force({}, machine="aarch64")
    assert got["usable_cpus"] == fp.usable_cpus()
    assert got["omp_threads"] == fp.usable_cpus()


def test_apply_threads() -> None:
    env: dict[str, str] = {"OMP_NUM_THREADS": "64"}
    fp.apply_threads(env, 3)
    assert env == {"OMP_NUM_THREADS": "3", "MXNET_OMP_MAX_THREADS": "3"}
    got = fp.threads_in_force(env, cpus=16, machine="x86_64")
    assert got["omp_threads"] == 3


def test_machine_id_is_an_anonymous_stable_hash(tmp_path: Path) -> None:
    raw = "0123456789abcdef0123456789abcdef"
    (tmp_path / "machine-id").write_text(raw + "\n")
    first = fp.machine_id((str(tmp_path / "missing"), str(tmp_path / "machine-id")))
    assert first is not None and len(first) == 12 and raw not in first
    assert first == fp.machine_id((str(tmp_path / "machine-id"),))
    (tmp_path / "other").write_text("fedcba9876543210fedcba9876543210")
    assert fp.machine_id((str(tmp_path / "other"),)) != first
    assert fp.machine_id((str(tmp_path / "missing"),)) is None


def test_perf_environment_stores_no_paths_user_or_host_names() -> None:
    env = {
        "MXNET_HOME": "/home/alice/.mxnet",
        "MXNET_LIBRARY_PATH": "lib/libmxnet.so",
        "MXNET_PROFILER_FILENAME": "profile.json",  # a place, even without a slash
        "KMP_SETTINGS_FILE": "~/kmp.txt",
        "MXNET_KVSTORE_HOST": "build-box-7",
        "MXNET_TAG": "run-by-alice",
        "KMP_TAG": "run-by-alice",
        "MXNET_ENGINE_TYPE": "ThreadedEnginePerDevice",
        "MXNET_CPU_WORKER_NTHREADS": "2",
        "OMP_NUM_THREADS": "2",
        "KMP_AFFINITY": "granularity=fine,compact,1,0",
    }
    got = fp.perf_environment(env, private=("alice", "build-box-7"))
    assert got == {
        "KMP_AFFINITY": "granularity=fine,compact,1,0",
        "KMP_SETTINGS_FILE": "<path>",
        "KMP_TAG": "<set>",
        "MXNET_CPU_WORKER_NTHREADS": "2",
        "MXNET_ENGINE_TYPE": "ThreadedEnginePerDevice",
        "OMP_NUM_THREADS": "2",
    }  # MXNet's places and the variables it does not document are not recorded at all


def test_private_names_are_this_user_and_host() -> None:
    import platform

    assert platform.node().lower() in fp.private_names() or len(platform.node()) < 3
