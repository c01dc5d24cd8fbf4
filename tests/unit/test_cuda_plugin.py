"""The plugin preloads the pip CUDA libraries before conftests and test modules import MXNet
(issue #17): a test file with ``import mxnet`` at its top must not fail on ``libcudnn.so.8``."""

from __future__ import annotations

import pytest

from pytest_mxperf import cuda

CONFTEST = """
from pytest_mxperf import cuda

# What a conftest importing MXNet at its top relies on: the preload already happened.
assert cuda.preload.calls == ["preload"], cuda.preload.calls
"""


class FakePreload:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.error = error

    def __call__(self, strategy: str | None = None) -> None:
        self.calls.append("preload")
        if self.error is not None:
            raise self.error


def test_preload_runs_before_the_first_conftest(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cuda, "cuda_build", lambda: "mxnet-cu112")
    monkeypatch.setattr(cuda, "preload", FakePreload())
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1)


def test_no_preload_for_the_cpu_build(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakePreload()
    monkeypatch.setattr(cuda, "cuda_build", lambda: None)
    monkeypatch.setattr(cuda, "preload", fake)
    pytester.makepyfile("def test_ok():\n    pass\n")
    pytester.runpytest_inprocess().assert_outcomes(passed=1)
    assert fake.calls == []


def test_a_bad_strategy_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = ValueError("PYTEST_MXPERF_CUDA: unknown CUDA library strategy 'gpu'")
    monkeypatch.setattr(cuda, "cuda_build", lambda: "mxnet-cu112")
    monkeypatch.setattr(cuda, "preload", FakePreload(error))
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*mxperf: PYTEST_MXPERF_CUDA: unknown CUDA library strategy*"])
