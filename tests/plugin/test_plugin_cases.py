"""Cases measured end to end through pytester with the fake back end (virtual clock, exact
numbers): skipped without ``--mxperf``, the table and JSON report, every mode, OOM and NaN, case
keys, devices and dtypes."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mxperf.testing.repos import read_report

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
    data = read_report(fake_pytester.path)
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
    keys = [c["key"] for c in read_report(fake_pytester.path)["cases"]]
    assert keys == [
        "fn/inference/float32/bs3/cpu",
        "m/forward_backward/float32/bs2/cpu",
        "m/inference/float32/bs2/cpu",
        "m/training/float32/bs2/cpu",
    ]


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
    cases = {c["key"]: c for c in read_report(fake_pytester.path)["cases"]}
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
