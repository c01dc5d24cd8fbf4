"""Issue 49 (reliability, round 4) through pytester with the fake back end: MXNet's integer
environment variables, baseline warnings under ``-q``, names a case key cannot hold, markers
checked only in benchmark runs, and refusals made at configure rather than after measuring."""

from __future__ import annotations

import pytest

TOY = (
    "from pytest_mxperf.testing import FakeModel\n"
    "def test_toy(mxperf):\n"
    "    mxperf.inference(FakeModel(400.0), batch_size=8, model='toy')\n"
)


# Item 4: each of these ended in "Fatal Python error: Aborted" (exit 134) or passed as OOM.
@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("MXNET_CPU_WORKER_NTHREADS", "abc", "[[]1, 4096]"),
        ("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN", "abc", "[[]0, 2147483647]"),
        ("OMP_NUM_THREADS", "99999999999999999999", "[[]1, 4096]"),
        ("MXNET_CPU_PRIORITY_NTHREADS", "-5", "[[]1, 4096]"),
    ],
)
def test_an_integer_variable_mxnet_cannot_take_is_a_usage_error(
    fake_pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
    accepted: str,
) -> None:
    fake_pytester.makepyfile(TOY)
    monkeypatch.setenv(name, value)
    result = fake_pytester.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*mxperf: {name}='{value}' is not a whole number in {accepted}*"])
    # --mxperf-threads replaces the thread variables, not the others.
    result = fake_pytester.runpytest("--mxperf", "--mxperf-threads", "1")
    if name == "OMP_NUM_THREADS":
        result.assert_outcomes(passed=1)
    else:
        assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_an_absurd_thread_count_is_a_usage_error(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(TOY)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-threads", "99999999")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*99999999*--mxperf-threads*thread count in [[]1, 4096]*"])
