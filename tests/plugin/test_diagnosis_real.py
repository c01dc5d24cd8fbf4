"""Real MXNet: a net that gained an expensive dense block regresses in a paired run, and the
message names the grown operator first, from profiles taken in the side processes."""

from __future__ import annotations

import json
from typing import Callable

import pytest

pytest.importorskip("mxnet")

NET_SUITE = """
from mxnet.gluon import nn

EXTRA = {extra}


def build():
    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"))
    for _ in range(EXTRA):
        net.add(nn.Dense(1024, activation="relu"), nn.Dense(256, activation="relu"))
    net.add(nn.Dense(10))
    return net


def test_mlp(mxperf):
    mxperf.inference(build(), batch_size=64, input_shape=(512,), model="mlp")
"""


def test_added_dense_block_is_named_first(
    real_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    real_pytester.makepyfile(test_suite=NET_SUITE.format(extra=0))
    commit("base")
    real_pytester.makepyfile(test_suite=NET_SUITE.format(extra=1))
    commit("an extra dense block")
    result = real_pytester.runpytest_subprocess(
        "--mxperf",
        "--mxperf-ab",
        "HEAD~1",
        "--mxperf-rounds",
        "3",
        "--mxperf-max-rounds",
        "5",
        "--mxperf-min-time",
        "0.4",
        "--mxperf-max-time",
        "1",
        # A warm-up of at most 1 s a side and round: 2 s made the paired run slower beside a
        # busy CPU, as under `pytest -n 2` (docs/measurements.md, "The plugin's own tests"),
        # and the change and its operators are found either way.
        "--mxperf-warmup-time",
        "1",
        # The profile is what this test is about: the first paired run decides (a regression's
        # second run is test_pair_confirm's and test_real_regression's).
        "--mxperf-pair-confirm",
        "off",
        "--mxperf-json",
        "report.json",
        "-W",
        "default::pytest.PytestWarning",
    )
    (case,) = json.loads((real_pytester.path / "report.json").read_text())["cases"]
    message = case["verdict"]["message"]
    print(message)
    assert case["verdict"]["status"] == "regressed", message
    result.assert_outcomes(failed=1)
    lines = message.splitlines()
    top = lines.index("top operators (baseline -> now):")
    assert top == 2  # right below the paired evidence
    # Run counts, then the entry that grew most: the added block is two more dense layers
    # (oneDNN fuses them with their activations, so the grown entry is a fused block that
    # gained FullyConnected; unfused, FullyConnected itself).
    assert "FullyConnected 2 -> 4" in lines[top + 2], message
    grown = lines[top + 3]
    assert ("gained" in grown and "FullyConnected" in grown.split("gained")[1]) or (
        grown.startswith("  FullyConnected: 2 -> 4 per step")
    ), message
    assert case["profile"] is not None and case["baseline_profile"] is not None
    assert case["memory"]["peak_mb"] >= 0
