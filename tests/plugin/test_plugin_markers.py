"""The ``mxperf`` marker end to end: expectation floors and their scope, bad markers as usage
errors naming the test (with and without ``--mxperf``), the marker's registration."""

from __future__ import annotations

import pytest

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


def test_bad_marker_is_said_without_blocking_a_plain_run(fake_pytester: pytest.Pytester) -> None:
    """Issue 49 item 8: a bad marker blocked plain ``pytest`` (no ``--mxperf``); it blocks only
    benchmark runs, and a plain run says it in the benchmark's skip reason."""
    fake_pytester.makepyfile(
        """
        import pytest
        @pytest.mark.mxperf(expect="fast")
        def test_bad():
            pass

        def test_unit():
            pass
        """
    )
    result = fake_pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED*run `pytest --mxperf`*test_bad: bad @pytest.mark.mxperf: expect must be a*"]
    )
    result = fake_pytester.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_bad: bad @pytest.mark.mxperf: expect must be a non-empty dict*"]
    )


def test_marker_registered(fake_pytester: pytest.Pytester) -> None:
    result = fake_pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.mxperf(expect=None, *hardware=*"])
