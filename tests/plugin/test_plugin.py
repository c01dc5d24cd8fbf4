"""Plugin behaviour through pytester with the fake back end (virtual clock, exact numbers)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

TOY = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("batch_size", [1, 8])
def test_toy(mxperf, batch_size):
    r = mxperf.inference(FakeModel(images_per_sec=400.0), batch_size=batch_size, model="toy")
    assert r.images_per_sec == pytest.approx(400.0)

def test_train(mxperf):
    r = mxperf.training(FakeModel(images_per_sec=300.0), batch_size=4, model="toy")
    assert r.images_per_sec == pytest.approx(100.0)

def test_not_a_benchmark():
    assert True
"""


def _report(pytester: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data


def test_benchmarks_skip_without_mxperf(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(TOY)
    result = fake_pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*run `pytest --mxperf` to measure it*"])


def test_plain_run_never_imports_mxnet(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys
        def test_a(mxperf):
            pass
        def test_check():
            assert "mxnet" not in sys.modules
        """
    )
    pytester.makeconftest(
        """
        import sys
        def pytest_sessionfinish(session):
            print("MXNET-IMPORTED" if "mxnet" in sys.modules else "MXNET-NOT-IMPORTED")
        """
    )
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*MXNET-NOT-IMPORTED*"])


def test_measures_and_prints_table_and_json(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(TOY)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*mxperf: throughput (images/sec*",
            "*toy*cpu(0)*1*400.0*",
            "*mxperf grid: inference, float32, cpu*",
            "*mxperf verdicts: 3 new*",
        ]
    )
    data = _report(fake_pytester)
    cases = {c["key"]: c for c in data["cases"]}
    assert sorted(cases) == [
        "toy/inference/float32/bs1/cpu",
        "toy/inference/float32/bs8/cpu",
        "toy/training/float32/bs4/cpu",
    ]
    case = cases["toy/inference/float32/bs8/cpu"]
    m = case["measurement"]
    assert m["images_per_sec"] == pytest.approx(400.0)
    assert len(m["block_images_per_sec"]) >= 5
    assert m["iqr"] == pytest.approx(0.0, abs=1e-6)
    assert m["warmup_steps"] >= 3 and m["warmup_steady"] is True
    assert case["batch_size"] == 8 and case["mode"] == "inference" and case["dtype"] == "float32"
    assert case["device"] == "cpu(0)" and case["hardware"].startswith("cpu-")
    assert case["threads"]["omp_threads"] >= 1
    assert case["software"]["mxnet"] == "fake-1.9.1"
    assert case["verdict"]["status"] == "new"


def test_results_on_user_properties(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(TOY)
    rec = fake_pytester.inline_run("--mxperf")
    props: list[Any] = [
        dict(r.user_properties)["mxperf"]
        for r in rec.getreports("pytest_runtest_logreport")
        if r.when == "call" and r.user_properties
    ]
    assert {p["key"] for p in props} == {
        "toy/inference/float32/bs1/cpu",
        "toy/inference/float32/bs8/cpu",
        "toy/training/float32/bs4/cpu",
    }


MODES = """
from pytest_mxperf.testing import FakeModel

def test_modes(mxperf):
    net = FakeModel(images_per_sec=600.0, train_factor=2.0)
    a = mxperf.inference(net, batch_size=2, model="m")
    b = mxperf.training(net, batch_size=2, model="m")
    c = mxperf.forward_backward(net, batch_size=2, model="m")
    d = mxperf.callable(lambda: 1, items_per_call=3, model="fn")
    assert [r.mode for r in (a, b, c, d)] == ["inference", "training", "forward_backward", "inference"]
    assert b.images_per_sec < a.images_per_sec
    assert d.batch_size == 3
"""


def test_every_mode_and_callable(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(MODES)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1)
    keys = [c["key"] for c in _report(fake_pytester)["cases"]]
    assert keys == [
        "fn/inference/float32/bs3/cpu",
        "m/forward_backward/float32/bs2/cpu",
        "m/inference/float32/bs2/cpu",
        "m/training/float32/bs2/cpu",
    ]


MARKED = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.mxperf(expect={8: 500.0}, tolerance=0.1)
def test_floor_missed(mxperf):
    mxperf.inference(FakeModel(images_per_sec=400.0), batch_size=8, model="a")

@pytest.mark.mxperf(expect={8: 420.0}, tolerance=0.1)
def test_floor_met(mxperf):
    mxperf.inference(FakeModel(images_per_sec=400.0), batch_size=8, model="b")

@pytest.mark.mxperf(expect={8: 5000.0}, hardware="gpu-*v100*")
def test_scoped_out(mxperf):
    mxperf.inference(FakeModel(images_per_sec=400.0), batch_size=8, model="c")

@pytest.mark.mxperf(expect={"d": {8: 5000.0}, "other": {8: 1.0}})
def test_per_model(mxperf):
    mxperf.inference(FakeModel(images_per_sec=400.0), batch_size=8, model="d")

@pytest.mark.mxperf(expect={8: 5000.0}, mode="training")
def test_other_mode(mxperf):
    mxperf.inference(FakeModel(images_per_sec=400.0), batch_size=8, model="e")
"""


def test_marker_floor_pass_fail_and_scope(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(MARKED)
    result = fake_pytester.runpytest("--mxperf")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*a/inference/float32/bs8/cpu: measured 400.0 img/s is below the expected "
            "500.0 img/s (tolerance 10%, floor 450.0 img/s) on hardware cpu-*",
        ]
    )
    result.stdout.fnmatch_lines(["*FAILED*test_per_model*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("mxperf(expect={8: 100}, speed=3)", "unknown argument(s) speed"),
        ("mxperf(expect={0: 100})", "batch size must be a positive int"),
        ("mxperf(expect={8: -1})", "images/sec must be a positive number"),
        ("mxperf(expect={8: 1}, tolerance=2)", "tolerance must be a fraction"),
        ("mxperf(expect={8: 1}, mode='predict')", "mode must be one of"),
        ("mxperf({8: 1}, {4: 1})", "at most one positional argument"),
    ],
)
def test_bad_marker_is_a_usage_error_naming_the_test(
    fake_pytester: pytest.Pytester, marker: str, message: str
) -> None:
    fake_pytester.makepyfile(
        f"""
        import pytest
        @pytest.mark.{marker}
        def test_bad(mxperf):
            pass
        """
    )
    result = fake_pytester.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*test_bad_marker_is_a_usage_error_naming_the_test.py::test_bad: bad @pytest.mark.mxperf: *{message}*"
        ]
    )


def test_bad_marker_fails_without_mxperf_too(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        import pytest
        @pytest.mark.mxperf(expect="fast")
        def test_bad():
            pass
        """
    )
    result = fake_pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_bad: bad @pytest.mark.mxperf: expect must be a non-empty dict*"]
    )


def test_marker_registered(fake_pytester: pytest.Pytester) -> None:
    result = fake_pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.mxperf(expect=None, *hardware=*"])


def test_help_lists_options(fake_pytester: pytest.Pytester) -> None:
    result = fake_pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        ["*--mxperf *Run MXNet benchmarks*", "*--mxperf-ctx=KINDS*", "*--mxperf-threads=N*"]
    )
    # Help texts holding '%' (argparse %-formats them) print as written, not doubled.
    text = " ".join(result.stdout.str().split())
    assert "(the 99% confidence interval" in text
    assert "%%" not in text


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--mxperf-ctx", "tpu"], {}, "invalid value 'tpu' for command line option --mxperf-ctx"),
        ([], {"PYTEST_MXPERF_TOLERANCE": "lots"}, "environment variable PYTEST_MXPERF_TOLERANCE"),
        (["--mxperf-threads", "0"], {}, "--mxperf-threads: must be >= 1"),
        (
            ["--mxperf-pair-cpus", "fast"],
            {},
            "invalid value 'fast' for command line option --mxperf-pair-cpus: 'fast' is not a "
            "CPU number or range",
        ),
        (
            ["--mxperf-machine", ""],
            {},
            "invalid value '' for command line option --mxperf-machine: invalid hardware key ''",
        ),
        (
            [],
            {"PYTEST_MXPERF_MACHINE": "ci runner/a"},
            "invalid value 'ci runner/a' for environment variable PYTEST_MXPERF_MACHINE: "
            "invalid hardware key",
        ),
    ],
)
def test_bad_option_values_name_their_source(
    fake_pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    fake_pytester.makepyfile("def test_x(): pass")
    result = fake_pytester.runpytest("--mxperf", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_ini_option(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makeini("[pytest]\nmxperf_min_time = 0.5\nmxperf_max_time = 0.2\n")
    fake_pytester.makepyfile("def test_x(): pass")
    result = fake_pytester.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*min_time (0.5) is larger than max_time (0.2)*"])


def test_update_needs_mxperf(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("def test_x(): pass")
    result = fake_pytester.runpytest("--mxperf-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mxperf-update needs --mxperf*"])


BAD_RUNS = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("batch_size", [8, 64])
def test_oom(mxperf, batch_size):
    r = mxperf.inference(FakeModel(400.0, oom_from_batch=64), batch_size=batch_size, model="big")
    assert (r.status == "oom") == (batch_size == 64)

def test_nan(mxperf):
    mxperf.inference(FakeModel(400.0, nan=True), batch_size=8, model="nan")

def test_after(mxperf):
    mxperf.inference(FakeModel(400.0), batch_size=8, model="after")
"""


def test_oom_is_a_result_and_nan_fails(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(BAD_RUNS)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*nan/inference/float32/bs8/cpu: model output contains NaN/inf*"])
    result.stdout.fnmatch_lines(["*big*cpu(0)*64*OOM*"])
    cases = {c["key"]: c for c in _report(fake_pytester)["cases"]}
    oom = cases["big/inference/float32/bs64/cpu"]
    assert oom["status"] == "oom" and oom["measurement"] is None
    assert "out of memory" in oom["error"]
    assert oom["verdict"]["status"] == "oom" and not oom["verdict"]["failed"]
    assert cases["nan/inference/float32/bs8/cpu"]["verdict"]["status"] == "nan"
    assert cases["after/inference/float32/bs8/cpu"]["status"] == "ok"


def test_duplicate_case_keys_fail(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeModel
        def test_a(mxperf):
            mxperf.inference(FakeModel(10.0), batch_size=1, model="same")
        def test_b(mxperf):
            mxperf.inference(FakeModel(10.0), batch_size=1, model="same")
        def test_c(mxperf):
            mxperf.inference(FakeModel(10.0), batch_size=1, model="same", name="variant")
        """
    )
    result = fake_pytester.runpytest("--mxperf")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*case key 'same/inference/float32/bs1/cpu' is measured twice*"])


def test_key_defaults_to_marker_model_then_test_name(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        import pytest
        from pytest_mxperf.testing import FakeModel
        @pytest.mark.mxperf(model="from-marker")
        def test_a(mxperf):
            assert mxperf.inference(FakeModel(10.0), batch_size=1).model == "from-marker"
        @pytest.mark.parametrize("b", [1, 2])
        def test_resnet(mxperf, b):
            assert str(mxperf.inference(FakeModel(10.0), batch_size=b).key) == f"resnet/inference/float32/bs{b}/cpu"
        """
    )
    fake_pytester.runpytest("--mxperf").assert_outcomes(passed=3)


def test_threads_option_applied_and_recorded(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "import pytest\nfrom pytest_mxperf.testing import FakeBackend\n"
        "@pytest.fixture(scope='session')\ndef mxperf_backend():\n    return FakeBackend()\n"
    )
    pytester.makepyfile(
        """
        import os
        from pytest_mxperf.testing import FakeModel
        def test_t(mxperf):
            assert os.environ["OMP_NUM_THREADS"] == "2"
            assert os.environ["MXNET_OMP_MAX_THREADS"] == "2"
            r = mxperf.inference(FakeModel(10.0), batch_size=1, model="t")
            assert r.threads["omp_threads"] == 2
            assert r.environment["OMP_NUM_THREADS"] == "2"
        """
    )
    result = pytester.runpytest_subprocess(
        "--mxperf", "--mxperf-threads", "2", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mxperf: threads 2 OpenMP thread(s) (OMP_NUM_THREADS)*"])


def test_threads_env_variable(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_MXPERF_THREADS", "3")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    pytester.makepyfile(
        "import os\ndef test_t():\n    assert os.environ['OMP_NUM_THREADS'] == '3'\n"
    )
    pytester.runpytest_subprocess("--mxperf").assert_outcomes(passed=1)


def test_gpu_cases_skip_without_gpu(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeModel
        def test_dev(mxperf, mx_ctx):
            mxperf.inference(FakeModel(10.0), batch_size=1, ctx=mx_ctx, model="dev")
        """
    )
    result = fake_pytester.runpytest("--mxperf", "--mxperf-ctx", "cpu,gpu", "-v", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*test_dev?cpu? PASSED*", "*no GPU: MXNet sees 0 GPUs*"])


def test_gpu_cases_run_on_fake_gpu(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "import pytest\nfrom pytest_mxperf.testing import FakeBackend\n"
        "@pytest.fixture(scope='session')\ndef mxperf_backend():\n    return FakeBackend(gpus=2)\n"
    )
    pytester.makepyfile(
        """
        import pytest
        from pytest_mxperf.testing import FakeModel
        def test_dev(mxperf, mx_ctx):
            r = mxperf.inference(FakeModel(10.0), batch_size=1, ctx=mx_ctx, model="dev")
            assert r.device == "gpu(0)" and r.device_kind == "gpu"
            assert r.hardware.startswith("gpu-") and r.hardware.endswith("-x1")
        def test_fp16(mxperf, mx_ctx):
            r = mxperf.inference(FakeModel(10.0), batch_size=1, ctx=mx_ctx, dtype="float16", model="h")
            assert str(r.key) == "h/inference/float16/bs1/gpu"
        """
    )
    pytester.runpytest("--mxperf", "--mxperf-ctx", "gpu").assert_outcomes(passed=2)


def test_float16_on_cpu_skips(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeModel
        def test_h(mxperf):
            mxperf.inference(FakeModel(10.0), batch_size=1, dtype="float16", model="h")
        """
    )
    result = fake_pytester.runpytest("--mxperf", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*float16 on CPU: MXNet 1.9 has no float16 GEMM on CPU*"])


def test_missing_cuda_library_message() -> None:
    from pytest_mxperf.system.mxnet_import import _missing_library

    exc = OSError("libcudnn.so.8: cannot open shared object file: No such file or directory")
    message = str(_missing_library(exc))
    assert "libcudnn.so.8" in message and "pytest-mxperf[cpu]" in message


def test_plugin_import_is_light() -> None:
    code = "import pytest_mxperf.plugin, sys; print('mxnet' in sys.modules, 'git' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_hardware_key_hook_names_the_machine(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makeconftest(
        """
        import pytest
        from pytest_mxperf.testing import FakeBackend

        @pytest.fixture(scope="session")
        def mxperf_backend():
            return FakeBackend(gpus=1)

        def pytest_mxperf_hardware_key(config, detected):
            assert detected.startswith("cpu-")
            return "ci-runner-a"
        """
    )
    fake_pytester.makepyfile(
        """
        import pytest
        from pytest_mxperf.testing import FakeModel
        @pytest.mark.parametrize("kind", ["cpu", "gpu"])
        def test_toy(mxperf, mxperf_backend, kind):
            ctx = mxperf_backend.context(kind, 0)
            mxperf.inference(FakeModel(10.0), batch_size=1, model=f"toy-{kind}", ctx=ctx)
        """
    )
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["mxperf: hardware ci-runner-a (cpu)*"])
    hardware = {c["model"]: c["hardware"] for c in _report(fake_pytester)["cases"]}
    assert hardware == {"toy-cpu": "ci-runner-a", "toy-gpu": "ci-runner-a-gpu-x1"}
    # The option wins over the hook; a bad name from either is a usage error.
    again = fake_pytester.runpytest("--mxperf", "--mxperf-machine", "flag-name")
    again.stdout.fnmatch_lines(["mxperf: hardware flag-name (cpu)*"])
    fake_pytester.makeconftest(
        "def pytest_mxperf_hardware_key(config, detected):\n    return '../up'\n"
    )
    bad = fake_pytester.runpytest("--mxperf")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*invalid hardware key '../up'*"])
