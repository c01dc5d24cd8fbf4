"""The random state a benchmark test starts from (`pytest_mxperf.measuring.seeding`)."""

from __future__ import annotations

import random
import sys
import types
from typing import Any

import numpy
import pytest

from pytest_mxperf.measuring import seeding


def test_a_tests_seed_depends_on_the_base_and_its_node_id_only() -> None:
    a = seeding.seed_for(0, "t.py::test_a")
    assert a == seeding.seed_for(0, "t.py::test_a")
    assert len({a, seeding.seed_for(0, "t.py::test_b"), seeding.seed_for(1, "t.py::test_a")}) == 3
    assert all(0 <= seeding.seed_for(b, "x") < 2**31 for b in (0, 2**32 - 1))


def draws() -> tuple[float, float]:
    return random.random(), float(numpy.random.random())


def test_seeding_repeats_pythons_and_numpys_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "mxnet", raising=False)
    assert seeding.seed_generators(11) == ["random", "numpy"]
    first = draws()
    seeding.seed_generators(11)
    assert draws() == first
    seeding.seed_generators(12)
    assert draws() != first


def test_mxnet_is_seeded_only_once_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds: list[int] = []
    fake: Any = types.ModuleType("mxnet")
    fake.random = types.SimpleNamespace(seed=seeds.append)
    monkeypatch.setitem(sys.modules, "mxnet", fake)
    assert seeding.seed_generators(5) == ["random", "numpy", "mxnet"]
    assert seeds == [5]


def test_mxnet_draws_repeat_after_the_same_seed() -> None:
    pytest.importorskip("mxnet")
    from mxnet.gluon import nn

    def weights() -> Any:
        net = nn.Dense(4, in_units=8)
        net.initialize()
        return net.weight.data().asnumpy()

    seeding.seed_generators(3)
    first = weights()
    seeding.seed_generators(3)
    numpy.testing.assert_array_equal(weights(), first)
    seeding.seed_generators(4)
    assert not numpy.array_equal(weights(), first)
