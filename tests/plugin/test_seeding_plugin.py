"""``--mxperf-seed``: each benchmark test starts from a random state of its own, the same in
every run; other tests are left alone."""

from __future__ import annotations

import json

import numpy  # noqa: F401 (the suite's numpy: loaded out here, pytester's runs do not reload it)
import pytest

DRAWS_SUITE = """
import json, pathlib, random
import numpy
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.fixture
def drawn(request):
    # drawn in the fixture: the seed is set before a test's setup
    value = [random.random(), float(numpy.random.random())]
    with pathlib.Path("draws.jsonl").open("a") as out:
        out.write(json.dumps([request.node.name, value]) + "\\n")

def test_plain(drawn):  # first: it draws on from wherever the generators are
    pass

def test_a(mxperf, drawn):
    mxperf.inference(FakeModel(100.0), batch_size=1, model="a")

def test_b(mxperf, drawn):
    mxperf.inference(FakeModel(100.0), batch_size=1, model="b")
"""


def runs(pytester: pytest.Pytester, *args: str) -> list[dict[str, list[float]]]:
    """Two runs with ``args``: each run's draws by test name."""
    got = []
    for _ in range(2):
        (pytester.path / "draws.jsonl").unlink(missing_ok=True)
        pytester.runpytest("--mxperf", *args).assert_outcomes(passed=3)
        lines = (pytester.path / "draws.jsonl").read_text().splitlines()
        got.append({name: value for name, value in map(json.loads, lines)})
    return got


def test_benchmarks_draw_the_same_numbers_in_every_run(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(test_suite=DRAWS_SUITE)
    first, second = runs(fake_pytester)
    assert first["test_a"] == second["test_a"] and first["test_b"] == second["test_b"]
    assert first["test_a"] != first["test_b"]  # a test's own seed, not one for all
    # In-process runs share one interpreter: a test that is not a benchmark draws on.
    assert first["test_plain"] != second["test_plain"]
    other, _ = runs(fake_pytester, "--mxperf-seed", "7")
    assert other["test_a"] != first["test_a"]


def test_seed_off_leaves_the_generators_alone(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(test_suite=DRAWS_SUITE)
    first, second = runs(fake_pytester, "--mxperf-seed", "off")
    assert first["test_a"] != second["test_a"]
