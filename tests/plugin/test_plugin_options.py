"""The plugin's options and set-up end to end: help, bad values naming their source, ini and env,
threads, the hardware key hook, and a light import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_mxperf.testing.repos import read_report


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
        (["--mxperf-threads", "0"], {}, "--mxperf-threads: must be a thread count in ?1, 4096?"),
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
    hardware = {c["model"]: c["hardware"] for c in read_report(fake_pytester.path)["cases"]}
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
