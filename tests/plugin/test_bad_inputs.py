"""Bad inputs a user can hand the plugin, end to end (issue #10): what they see, and that the
run goes on where it can."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

CPU_OOM_SUITE = """
from oom_models import net


def test_a_huge_batch(mxperf):
    # 2000 x 3 x 224 x 224 floats: 1.2 GB of input alone, then the activations
    r = mxperf.inference(net(), batch_size=2000, model="mobilenet0.25")
    assert r.status.value == "oom"


def test_b_small_batch_afterwards(mxperf):
    r = mxperf.inference(net(), batch_size=1, input_shape=(3, 32, 32), model="mobilenet0.25-32px")
    assert r.status.value == "ok"
"""


def test_cpu_out_of_memory_is_a_result_and_the_run_goes_on(
    cpu_oom_run: Callable[..., tuple[pytest.RunResult, list[Any]]],
) -> None:
    # At most ~1.5 GB more than MXNet uses once warm (the cpu_oom_run fixture).
    result, found = cpu_oom_run(CPU_OOM_SUITE, 1_500_000_000)
    result.assert_outcomes(passed=2)
    cases: dict[str, Any] = {c["key"]: c for c in found}
    huge = cases["mobilenet0.25/inference/float32/bs2000/cpu"]
    assert huge["status"] == "oom" and huge["verdict"]["status"] == "oom"
    assert "Failed to allocate CPU Memory" in huge["error"]
    assert cases["mobilenet0.25-32px/inference/float32/bs1/cpu"]["status"] == "ok"
    result.stdout.fnmatch_lines(["*mobilenet0.25 *2000*OOM*"])


BAD_ARGUMENTS = """
from pytest_mxperf.testing import FakeModel

def test_items_per_call(mxperf):
    mxperf.callable(lambda: None, items_per_call=0, model="c")

def test_batch_size(mxperf):
    mxperf.inference(FakeModel(10.0), batch_size=-1, model="m")
"""


def test_bad_sizes_name_the_argument_passed(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(BAD_ARGUMENTS)
    result = fake_pytester.runpytest("--mxperf")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*ValueError: items_per_call must be a positive int, got 0",
            "*ValueError: batch_size must be a positive int, got -1",
        ]
    )


MODEL_ERRORS = """
import pytest
from pytest_mxperf.testing import FakeBackend, FakeModel

class Raising(FakeModel):
    pass

class RaisingBackend(FakeBackend):
    def prepare(self, model, spec):
        prepared = super().prepare(model, spec)
        if isinstance(model, Raising):
            def step():
                raise ValueError("operands could not be broadcast together")
            prepared.step = step
        return prepared

@pytest.fixture(scope="session")
def mxperf_backend():
    return RaisingBackend()

def test_value_error(mxperf):
    mxperf.inference(Raising(10.0), batch_size=8, model="raises")

def test_after(mxperf):
    mxperf.inference(FakeModel(10.0), batch_size=8, model="after")

def test_unknown_option(mxperf):
    mxperf.inference(FakeModel(10.0), batch_size=8, model="typo", input_shap=(3, 8, 8))
"""


def test_an_exception_from_the_model_is_an_error_row(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(test_errors=MODEL_ERRORS)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "r.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "mxperf: raises/inference/float32/bs8/cpu: ValueError: operands could not be broadcast*",
            "*TypeError: unknown option(s) input_shap; allowed: *",
            "raises *cpu(0)*8*ERROR*error*",
            "FAILED *test_value_error - Failed: mxperf: raises/*",
            "FAILED *test_unknown_option - TypeError: unknown option*",
        ]
    )
    cases = json.loads((fake_pytester.path / "r.json").read_text())["cases"]
    assert {c["model"]: c["status"] for c in cases} == {"raises": "error", "after": "ok"}


def test_a_callable_that_computes_nothing_is_flagged(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        def test_silent(mxperf):
            mxperf.callable(lambda: None, items_per_call=4, model="silent")
        """
    )
    # -W: this repository's own runs make warnings errors
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-json", "r.json", "-W", "always::pytest.PytestWarning"
    )
    # The warning itself is matched below; its count is not asserted: in a long in-process
    # session pytest may add its own "already imported, cannot be rewritten" warnings.
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*PytestWarning: mxperf: silent/inference/float32/bs4/cpu: the callable returned None*"]
    )
    (case,) = json.loads((fake_pytester.path / "r.json").read_text())["cases"]
    assert case["warnings"][0].startswith("the callable returned None on every call")
