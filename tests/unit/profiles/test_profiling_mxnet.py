"""Operator profiles of small real Gluon nets: the diff names what was added, and the profiler
is left clean after every profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

mx = pytest.importorskip("mxnet")

from pytest_mxperf.config.casekey import CaseKey  # noqa: E402
from pytest_mxperf.measuring.diagnosis import trace_path_for  # noqa: E402
from pytest_mxperf.profiles.profile_diff import constituents, diff_profiles  # noqa: E402
from pytest_mxperf.profiles.profile_record import OperatorProfile, ProfileUnavailable  # noqa: E402
from pytest_mxperf.profiles.profile_render import render_diff  # noqa: E402
from pytest_mxperf.profiles.profile_trace import table_path_for  # noqa: E402
from pytest_mxperf.profiles.profiling import profile_step  # noqa: E402

STEPS = 5
BATCH = 4


def gluon_step(
    extra: Callable[[Any], None] | None = None, hybridize: bool = True
) -> Callable[[], None]:
    """A warmed-up inference step of a small conv net at 32x32, batch 4."""
    nn = mx.gluon.nn
    net = nn.HybridSequential()
    net.add(nn.Conv2D(16, 3, padding=1, activation="relu"))
    net.add(nn.Conv2D(16, 3, padding=1, activation="relu"))
    if extra is not None:
        extra(net)
    net.add(nn.Dense(32), nn.Dense(10))
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.ones((BATCH, 3, 32, 32))
    out: dict[str, Any] = {}

    def step() -> None:
        out["y"] = net(x)

    for _ in range(3):
        step()
    mx.nd.waitall()
    return step


def profile(step: Callable[[], None], steps: int = STEPS) -> OperatorProfile:
    return profile_step(step, mx.nd.waitall, steps, mx, items_per_step=BATCH)


def operator_runs(p: OperatorProfile, member: str) -> int:
    """How often ``member`` ran in a profile, fused or not."""
    return sum(
        o.count * constituents(o.name).count(member)
        for o in p.operators
        if o.category == "operator"
    )


def test_added_conv_block_is_named_first() -> None:
    before = profile(gluon_step())
    # An expensive extra convolution (64 channels, no activation): most of the new time.
    after = profile(gluon_step(lambda net: net.add(mx.gluon.nn.Conv2D(64, 3, padding=1))))
    diff = diff_profiles(before, after)
    assert diff.count_changes[0].name == "Convolution"
    assert (diff.count_changes[0].per_step_before, diff.count_changes[0].per_step_after) == (2, 3)
    grown = diff.changes[0]
    assert "Convolution" in constituents(grown.name)
    assert grown.status in ("changed", "new") or "Convolution" in grown.added
    lines = render_diff(diff)
    print("\n".join(lines))  # the shape of a real failure message, for the report
    assert lines[1].startswith("runs per step: Convolution 2 -> 3")
    assert "Convolution" in lines[2]


def test_operator_on_one_side_is_new() -> None:
    # Imperative (not hybridized): no fusion, every operator is its own entry.
    before = profile(gluon_step(hybridize=False))
    after = profile(gluon_step(lambda net: net.add(mx.gluon.nn.LeakyReLU(0.1)), hybridize=False))
    diff = diff_profiles(before, after)
    assert [c.name for c in diff.new] == ["LeakyReLU"]
    assert diff.new[0].count_per_step_after == 1
    lines = render_diff(diff)
    print("\n".join(lines))
    assert any(line.startswith("new: LeakyReLU") for line in lines)


def test_profiles_do_not_accumulate() -> None:
    step = gluon_step()
    first, second = profile(step, steps=3), profile(step, steps=5)
    per_step = operator_runs(first, "Convolution") / 3
    assert per_step == 2
    assert operator_runs(second, "Convolution") == 5 * per_step
    assert diff_profiles(first, second).count_changes == ()


def test_failing_step_leaves_profiler_stopped_and_clean() -> None:
    good = gluon_step()

    def bad() -> None:
        good()
        raise RuntimeError("boom")

    with pytest.raises(ProfileUnavailable, match="the step raised RuntimeError: boom"):
        profile(bad)
    # Stopped: work done now is not recorded (statistics stay on from our config, so
    # dumps shows what was recorded since the reset).
    for _ in range(3):
        good()
    mx.nd.waitall()
    recorded = json.loads(mx.profiler.dumps(format="json", reset=True))
    assert not recorded.get("Time", {}).get("operator")
    # And the next profile works and counts only itself.
    assert operator_runs(profile(good, steps=2), "Convolution") == 4


def test_a_case_trace_for_mxperf_profile(tmp_path: Path) -> None:
    # As --mxperf-profile DIR names and writes a case's trace (`diagnosis.profile_case`).
    path = trace_path_for(
        str(tmp_path / "profiles"), CaseKey("small-conv", "inference", "float32", 4, "cpu")
    )
    assert path is not None
    p = profile_step(gluon_step(), mx.nd.waitall, 2, mx, path, items_per_step=BATCH)
    table = table_path_for(path)
    assert path.parent == tmp_path / "profiles"
    assert path.name.endswith(".trace.json") and "/" not in path.name
    trace = json.loads(path.read_text())
    assert isinstance(trace["traceEvents"], list)
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert any("Convolution" in name for name in names)
    assert table.name.endswith(".table.txt")
    assert "Convolution" in table.read_text()
    assert operator_runs(p, "Convolution") == 4
