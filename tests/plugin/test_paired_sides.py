"""Paired runs: the side processes that measure one revision (selected cases, block plan)."""

from __future__ import annotations

import json

import pytest

SIDE_SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("batch", [1, 8])
def test_toy(mxperf, batch):
    mxperf.inference(FakeModel(100.0 * batch), batch_size=batch, model="toy")

def test_other(mxperf):
    mxperf.inference(FakeModel(5.0), batch_size=1, model="other")
"""


def test_side_process_measures_the_selected_cases_once(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(test_suite=SIDE_SUITE, test_broken="import no_such_module\n")
    (fake_pytester.path / "select.txt").write_text(
        "test_suite.py::test_toy[8]\ntest_suite.py::test_other\ntest_suite.py::test_gone\n"
    )
    result = fake_pytester.runpytest(
        "--continue-on-collection-errors",
        "--mxperf-side-out",
        "side.json",
        "--mxperf-side-select",
        "select.txt",
        # A side never arbitrates, updates or re-measures, whatever else it is told.
        "--mxperf-update",
        "--mxperf-confirm",
        "5",
    )
    result.assert_outcomes(passed=2, deselected=1, errors=1)
    side = json.loads((fake_pytester.path / "side.json").read_text())
    cases = {c["key"]: c for c in side["cases"]}
    assert set(cases) == {"toy/inference/float32/bs8/cpu", "other/inference/float32/bs1/cpu"}
    assert all(len(c["attempts"]) == 1 for c in cases.values())
    assert cases["toy/inference/float32/bs8/cpu"]["measurement"]["images_per_sec"] == (
        pytest.approx(800.0)
    )
    ((nodeid, text),) = side["collect_errors"]
    assert nodeid == "test_broken.py" and "no_such_module" in text
    assert not (fake_pytester.path / "baselines").exists()  # --mxperf-update was ignored


@pytest.mark.parametrize("planned", [True, False])
def test_side_process_times_the_blocks_a_plan_gives(
    fake_pytester: pytest.Pytester, planned: bool
) -> None:
    fake_pytester.makepyfile(test_suite=SIDE_SUITE)
    (fake_pytester.path / "select.txt").write_text(
        "test_suite.py::test_toy[1]\ntest_suite.py::test_toy[8]\n"
    )
    plan = {"toy/inference/float32/bs8/cpu": 3} if planned else {}
    (fake_pytester.path / "plan.json").write_text(json.dumps(plan))
    result = fake_pytester.runpytest(
        "--mxperf-side-out",
        "side.json",
        "--mxperf-side-select",
        "select.txt",
        "--mxperf-side-plan",
        "plan.json",
    )
    result.assert_outcomes(passed=2)
    side = json.loads((fake_pytester.path / "side.json").read_text())
    steps = {c["key"]: c["measurement"]["steps_per_block"] for c in side["cases"]}
    # Unplanned cases size their own 0.1 s blocks of 0.01 s steps (10, or 11 by float rounding).
    assert steps["toy/inference/float32/bs1/cpu"] in (10, 11)
    bs8 = steps["toy/inference/float32/bs8/cpu"]
    assert bs8 == 3 if planned else bs8 in (10, 11)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read the paired run's block plan"),
        ("[3]", "is not a mapping of case keys to steps >= 1"),
        ('{"toy/inference/float32/bs8/cpu": 0}', "is not a mapping of case keys to steps >= 1"),
    ],
)
def test_side_process_refuses_a_bad_plan(
    fake_pytester: pytest.Pytester, content: str | None, problem: str
) -> None:
    fake_pytester.makepyfile(test_suite=SIDE_SUITE)
    if content is not None:
        (fake_pytester.path / "plan.json").write_text(content)
    result = fake_pytester.runpytest(
        "--mxperf-side-out", "side.json", "--mxperf-side-plan", "plan.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*mxperf: *{problem}*"])
    assert "Traceback" not in result.stderr.str()
    assert not (fake_pytester.path / "side.json").exists()


@pytest.mark.parametrize(
    ("flag", "value"), [("--mxperf-side-turns", "no-path"), ("--mxperf-side-spread", "0-x")]
)
def test_side_process_refuses_a_bad_order_naming_it(
    fake_pytester: pytest.Pytester, flag: str, value: str
) -> None:
    fake_pytester.makepyfile(test_suite=SIDE_SUITE)
    result = fake_pytester.runpytest("--mxperf-side-out", "side.json", flag, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*mxperf: invalid value {value!r} for command line option {flag}*"]
    )
    assert "Traceback" not in result.stderr.str()
    assert not (fake_pytester.path / "side.json").exists()


ERRATIC_SUITE = """
import random
from pytest_mxperf.testing import FakeArray, FakeModel


class Source:
    # A loader of its own class: a side times it in a turn of its own. Erratic: each batch
    # takes 5 ms or 50 ms at random (seeded), so its 0.1 s blocks disagree by far more than 20%.
    def __init__(self, backend, erratic):
        self.backend, self.erratic, self.rng = backend, erratic, random.Random(7)

    def __iter__(self):
        for _ in range(100000):
            self.backend.now += self.rng.choice((0.005, 0.05)) if self.erratic else 0.01
            yield FakeArray((8, 1))


def test_erratic(mxperf, mxperf_backend):
    mxperf.pipeline(Source(mxperf_backend, True), model="erratic")


def test_steady(mxperf, mxperf_backend):
    mxperf.pipeline(Source(mxperf_backend, False), model="steady")


def test_model(mxperf):  # timed with the rest of the round, never re-measured in a side
    mxperf.inference(FakeModel(100.0, jitter=0.9), batch_size=1, model="model")
"""


def test_side_measures_a_disturbed_case_of_a_turn_of_its_own_once_more(
    fake_pytester: pytest.Pytester,
) -> None:
    fake_pytester.makepyfile(test_suite=ERRATIC_SUITE)
    result = fake_pytester.runpytest("--mxperf-side-out", "side.json")
    result.assert_outcomes(passed=3)
    cases = {
        c["key"].split("/")[0]: c
        for c in json.loads((fake_pytester.path / "side.json").read_text())["cases"]
    }
    erratic, steady = cases["erratic"], cases["steady"]
    assert len(erratic["attempts"]) == 2  # the first spread beyond SIDE_RETRY_SPREAD
    # the better kept (`runner.better_attempt`): a steady one, and the faster
    assert erratic["measurement"]["rel_iqr"] <= 0.25
    assert erratic["measurement"]["images_per_sec"] == pytest.approx(max(erratic["attempts"]))
    assert len(steady["attempts"]) == 1 and len(cases["model"]["attempts"]) == 1
