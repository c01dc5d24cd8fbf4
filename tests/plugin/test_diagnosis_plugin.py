"""Say what got slower, end to end on the fake back end: operator profiles of both sides,
memory, start-up, the evidence order of a regression's message, and ``--mxperf-profile``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_mxperf.testing.repos import git

SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

SPEED, OPERATORS, MEMORY = {speed}, {operators}, {memory}

def test_net(mxperf):
    mxperf.inference(
        FakeModel(SPEED, operators=OPERATORS, memory_mb=MEMORY), batch_size=8, model="net"
    )

def test_steady(mxperf):
    mxperf.inference(FakeModel(50.0), batch_size=8, model="steady")
"""
BASE = {"speed": 100.0, "operators": {"Convolution": (2, 1.0)}, "memory": 64.0}
# An extra activation block: 20 ms more per step of 8 images, and more memory.
GROWN = {
    "speed": 80.0,
    "operators": {"Convolution": (2, 0.8), "Activation": (3, 0.2)},
    "memory": 128.0,
}


# This repository's own suite turns warnings into errors; a growth warning is checked apart.
NO_WARNING_ERRORS = ("-W", "default::pytest.PytestWarning")


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "report.json").read_text())
    return data


def _cases(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    return {c["model"]: c for c in _report(pytester)["cases"]}


def test_paired_regression_names_the_added_operator_first(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=SUITE.format(**BASE))
    base = commit("base")
    fake_pytester.makepyfile(test_suite=SUITE.format(**GROWN))
    commit("add an activation block")
    # The first paired run decides (no second run on fresh processes: test_pair_confirm's).
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json",
        "--mxperf-pair-confirm", "off", *NO_WARNING_ERRORS,
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    net = _cases(fake_pytester)["net"]
    lines = net["verdict"]["message"].splitlines()
    assert lines[0].startswith("net/inference/float32/bs8/cpu: HEAD vs HEAD~1: -20.0%")
    assert lines[1].startswith("img/s per round (HEAD~1/HEAD): ")
    assert lines[2] == "top operators (baseline -> now):"
    assert lines[3] == "  operator time: 80.00 -> 100.00 ms/step (+25%)"
    assert lines[4] == "  runs per step: Activation 0 -> 3"
    # the grown part comes first, with its count per step, time before/after and share
    assert lines[5] == "  new: Activation: 3 per step, 20.00 ms/step, 100% of the change"
    assert lines[6] == "peak memory: 64.0 -> 128.0 MiB (+100%, cpu, declared)"
    assert lines[7] == "changed between HEAD~1 and HEAD: nothing recorded (both sides ran here)"
    assert lines[8].startswith(f"commits since the baseline (git log --oneline {base[:10]}..")
    assert lines[9].endswith(" add an activation block") and len(lines) == 10
    # JSON keeps both whole profiles
    ops = {o["name"] for o in net["baseline_profile"]["operators"]}
    assert ops == {"Convolution"}
    assert {o["name"] for o in net["profile"]["operators"]} == {"Convolution", "Activation"}
    assert net["peak_memory_mb"] == 128.0 and net["verdict"]["memory_trend"] == "grew"
    assert net["verdict"]["baseline_memory_mb"] == 64.0
    assert any("peak memory grew: 64.0 -> 128.0 MiB (+100%)" in w for w in net["warnings"])
    result.stdout.fnmatch_lines(["*PytestWarning: mxperf: net/*: peak memory grew: 64.0 -> 128.0*"])


def test_stored_regression_without_a_pair_reports_heads_profile_and_why(
    fake_pytester: pytest.Pytester, store_baseline: Callable[..., str], commit: Callable[[str], str]
) -> None:
    store_baseline(SUITE.format(**BASE), message="base")
    commit("baseline")
    grown = dict(GROWN, speed=60.0)  # beyond the 20% floor of an unconfirmed drop
    fake_pytester.makepyfile(test_suite=SUITE.format(**grown))
    commit("slower")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-arbitrate", "off", "--mxperf-json", "report.json", *NO_WARNING_ERRORS
    )
    result.assert_outcomes(passed=1, failed=1)
    lines = _cases(fake_pytester)["net"]["verdict"]["message"].splitlines()
    at = lines.index(
        "top operators now (profile of the baseline unavailable: no paired run of the "
        "baseline commit (--mxperf-arbitrate is off)):"
    )
    assert lines[at + 1] == "  Convolution: 2 per step, 106.67 ms/step (80%)"
    assert lines[at + 2] == "  Activation: 3 per step, 26.67 ms/step (20%)"
    assert lines[at + 3].startswith("peak memory: 64.0 -> 128.0 MiB")
    assert lines[at + 4] == "changed since the baseline: nothing recorded"
    assert lines[at + 5].startswith("commits since the baseline")
    assert (
        lines.index(
            "not confirmed by a paired run (--mxperf-arbitrate is off): judged "
            "against the stored figure"
        )
        < at
    )


FAILING_PROFILER = """
import pytest
from pytest_mxperf.testing import FakeBackend

@pytest.fixture
def mxperf_backend():
    backend = FakeBackend()
    backend.mx.profiler.fail = RuntimeError("MXNet built without the profiler")
    return backend
"""


def test_failing_profiler_still_reports_the_regression(
    fake_pytester: pytest.Pytester, store_baseline: Callable[..., str]
) -> None:
    store_baseline(SUITE.format(**BASE), message="base")
    (fake_pytester.path / "conftest.py").write_text(
        (fake_pytester.path / "conftest.py").read_text() + FAILING_PROFILER
    )
    fake_pytester.makepyfile(test_suite=SUITE.format(**dict(BASE, speed=50.0)))
    result = fake_pytester.runpytest(
        "--mxperf",
        "--mxperf-arbitrate",
        "off",
        "--mxperf-allow-dirty",
        "--mxperf-json",
        "report.json",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*net/inference/float32/bs8/cpu: 50.0 img/s vs baseline 100.0 img/s (-50.0%)*",
            "*top operators: profile unavailable: set_state('stop') failed: RuntimeError: "
            "MXNet built without the profiler*",
        ]
    )
    net = _cases(fake_pytester)["net"]
    assert net["verdict"]["status"] == "regressed" and net["profile"] is None
    assert "MXNet built without the profiler" in net["profile_error"]


def test_profile_dir_writes_one_trace_per_case_and_changes_no_figure(
    fake_pytester: pytest.Pytester,
) -> None:
    fake_pytester.makepyfile(test_suite=SUITE.format(**BASE))
    plain = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    plain.assert_outcomes(passed=2)
    before = _cases(fake_pytester)
    traced = fake_pytester.runpytest(
        "--mxperf", "--mxperf-json", "report.json", "--mxperf-profile", "prof"
    )
    traced.assert_outcomes(passed=2)
    after = _cases(fake_pytester)
    for name in ("net", "steady"):
        # A/A: profiling runs after the timed blocks, so every block is the same
        assert (
            after[name]["measurement"]["block_seconds"]
            == before[name]["measurement"]["block_seconds"]
        )
        trace = Path(fake_pytester.path / after[name]["profile_trace"])
        events = json.loads(trace.read_text())["traceEvents"]
        assert (
            events
            and trace.name == f"{name}_inference_float32_bs8_cpu-{trace.name[-19:-11]}.trace.json"
        )
        assert Path(fake_pytester.path / after[name]["profile_table"]).exists()
        assert after[name]["profile"] is not None
    assert sorted(p.name.split(".")[-2] for p in (fake_pytester.path / "prof").iterdir()) == [
        "table",
        "table",
        "trace",
        "trace",
    ]


def test_strict_fails_memory_growth_and_marker_caps_memory(
    fake_pytester: pytest.Pytester, store_baseline: Callable[..., str], commit: Callable[[str], str]
) -> None:
    store_baseline(SUITE.format(**BASE), message="base")
    commit("baseline")
    fake_pytester.makepyfile(test_suite=SUITE.format(**dict(BASE, memory=200.0)))
    commit("more memory")
    loose = fake_pytester.runpytest("--mxperf", *NO_WARNING_ERRORS)
    loose.assert_outcomes(passed=2)
    strict = fake_pytester.runpytest(
        "--mxperf", "--mxperf-strict", "--mxperf-memory", *NO_WARNING_ERRORS
    )
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(
        [
            "*net/inference/float32/bs8/cpu: peak memory grew: 64.0 -> 200.0 MiB (+212%), "
            "tolerance 10% and at least 16 MiB*",
            "*peak MiB*",
            "*mxperf verdicts: 1 memory, 1 pass*",
        ]
    )
    capped = SUITE.format(**BASE).replace(
        "def test_net(", "@pytest.mark.mxperf(max_memory_mb=32)\ndef test_net("
    )
    fake_pytester.makepyfile(test_suite=capped)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-allow-dirty")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*net/inference/float32/bs8/cpu: peak memory 64.0 MiB is above the marker's "
            "max_memory_mb=32*"
        ]
    )


def test_a_stored_peak_is_judged_against_the_range_of_the_stored_runs(
    fake_pytester: pytest.Pytester, store_baseline: Callable[..., str], commit: Callable[[str], str]
) -> None:
    store_baseline(SUITE.format(**BASE), message="base")
    # Two stored runs of the same code peaked at 64 and 100 MiB (identical processes differ).
    (path,) = (fake_pytester.path / "baselines").rglob("*.json")
    data = json.loads(path.read_text())
    (key,) = [k for k in data["cases"] if k.startswith("net/")]
    assert data["cases"][key]["peak_memory_runs"] == [64.0]
    data["cases"][key]["peak_memory_runs"] = [64.0, 100.0]
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    commit("baseline")
    for memory, grew in ((98.0, False), (130.0, True)):
        fake_pytester.makepyfile(test_suite=SUITE.format(**dict(BASE, memory=memory)))
        commit(f"{memory} MiB")
        result = fake_pytester.runpytest(
            "--mxperf", "--mxperf-strict", "--mxperf-memory", "--mxperf-json", "report.json"
        )
        net = _cases(fake_pytester)["net"]
        if grew:  # beyond the highest stored run
            result.assert_outcomes(passed=1, failed=1)
            assert net["verdict"]["memory_trend"] == "grew"
            result.stdout.fnmatch_lines(["*peak memory grew: 100.0 -> 130.0 MiB (+30%)*"])
        else:  # +53% over the last run's 64 MiB, but within the stored runs' range
            result.assert_outcomes(passed=2)
            assert net["verdict"]["memory_trend"] == "same"
            assert net["verdict"]["baseline_memory_mb"] == 98.0


def test_startup_growth_is_flagged(
    fake_pytester: pytest.Pytester, store_baseline: Callable[..., str]
) -> None:
    store_baseline(SUITE.format(**BASE), message="base")
    stored = next((fake_pytester.path / "baselines").rglob("*.json"))
    case = json.loads(stored.read_text())["cases"]["net/inference/float32/bs8/cpu"]
    assert case["first_step_seconds"] == pytest.approx(0.5)  # the cold first attempt's
    assert case["warmup_seconds"] > 0 and case["peak_memory_mb"] == 64.0
    slow_start = SUITE.format(**BASE).replace(
        "memory_mb=MEMORY)", "memory_mb=MEMORY, first_step_seconds=2.0)"
    )
    fake_pytester.makepyfile(test_suite=slow_start)
    git(fake_pytester.path, "add", "-A")
    result = fake_pytester.runpytest(
        "--mxperf",
        "--mxperf-allow-dirty",
        *NO_WARNING_ERRORS,
        "--mxperf-json",
        "report.json",
    )
    result.assert_outcomes(passed=2)
    net = _cases(fake_pytester)["net"]
    # the first step is part of the warm-up, which grew with it
    assert net["verdict"]["startup"][0] == "first step: 500 ms -> 2.00 s (4.0x)"
    assert net["warnings"][0] == "start-up grew: first step: 500 ms -> 2.00 s (4.0x)"
    assert _cases(fake_pytester)["steady"]["verdict"]["startup"] == []


# Each process that imports the suite takes the next peak of each case: the controller (which
# only collects), then the sides in their order: round 1 REV, HEAD; round 2 HEAD, REV; round 3
# REV, HEAD. Lock-step sides collect at the same time, so each side counts its own processes
# (HEAD's tree is the controller's; REV's is a worktree).
PER_PROCESS = """
from pathlib import Path
import pytest
from pytest_mxperf.testing import FakeModel

HEAD = Path(__file__).resolve().parent == Path({root!r}).resolve()
COUNTER = Path({counter!r} + (".head" if HEAD else ".rev"))
N = int(COUNTER.read_text()) if COUNTER.exists() else 0
COUNTER.write_text(str(N + 1))
PEAKS = {peaks!r}

@pytest.mark.parametrize("name", sorted(PEAKS))
def test_net(mxperf, name):
    peak = PEAKS[name]["head" if HEAD else "rev"][N]
    mxperf.inference(FakeModel(100.0, memory_mb=peak), batch_size=8, model=name)
"""

#: Each case's peaks in process order (controller, then the sides as above), its trend, and
#: HEAD's and REV's figure.
MEMORY_CASES = {
    # identical code whose peak moves between processes: REV 64, 64, 100 and HEAD 100,
    # 100, 64 (HEAD's middle round, 100, against REV's median, 64, read as +56%)
    "spread": ([0.0, 64.0, 100.0, 100.0, 64.0, 100.0, 64.0], "same", 100.0, 100.0),
    # HEAD needs 200 MiB in every round: judged against REV's highest round
    "grown": ([0.0, 64.0, 200.0, 200.0, 64.0, 100.0, 200.0], "grew", 200.0, 100.0),
    # and 30 MiB: against REV's lowest
    "shrunk": ([0.0, 64.0, 30.0, 30.0, 64.0, 100.0, 30.0], "shrank", 30.0, 64.0),
}


def test_paired_memory_is_heads_median_against_revs_nearest_round(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    """One paired run, a case per way the peaks can fall (`MEMORY_CASES`)."""
    counter = fake_pytester.path / "processes"
    with (fake_pytester.path / ".gitignore").open("a") as f:
        f.write("processes.*\n")
    peaks = {
        name: {"head": [p[i] for i in (0, 2, 3, 6)], "rev": [p[i] for i in (1, 4, 5)]}
        for name, (p, _, _, _) in MEMORY_CASES.items()
    }
    suite = PER_PROCESS.format(root=str(fake_pytester.path), counter=str(counter), peaks=peaks)
    fake_pytester.makepyfile(test_suite=suite)
    commit("suite")
    for side in ("head", "rev"):
        Path(f"{counter}.{side}").unlink(missing_ok=True)
    rounds = ("--mxperf-rounds", "3", "--mxperf-max-rounds", "3")
    result = fake_pytester.runpytest_subprocess(
        "--mxperf", "--mxperf-ab", "HEAD", *rounds, "--mxperf-json", "report.json",
        *NO_WARNING_ERRORS,
    )  # fmt: skip
    result.assert_outcomes(passed=len(MEMORY_CASES))
    # The controller and six sides: the peaks were all used.
    assert Path(f"{counter}.head").read_text() == "4" and Path(f"{counter}.rev").read_text() == "3"
    cases = _cases(fake_pytester)
    said = [line for line in result.stdout.lines if "peak memory" in line]
    for name, (_, trend, head, base) in MEMORY_CASES.items():
        net = cases[name]
        assert net["verdict"]["memory_trend"] == trend, name
        assert net["peak_memory_mb"] == head and net["verdict"]["baseline_memory_mb"] == base
        if trend == "grew":
            grew = "peak memory grew: 100.0 -> 200.0 MiB (+100%)"
            assert any(grew in w for w in net["warnings"])
            result.stdout.fnmatch_lines([f"*PytestWarning: mxperf: {name}/*: {grew}*"])
        else:
            assert not net["warnings"], name
    # Nothing says "peak memory" of the other cases: every such line is the grown case's.
    assert said and all("mxperf: grown/" in line for line in said), said
