"""What is taken around a case's timed blocks (memory, operator profile) and the evidence
sections of a regression's message, on the fake back end."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging import evidence_lines
from pytest_mxperf.measuring import diagnosis
from pytest_mxperf.measuring.diagnosis import DiagnoseSpec
from pytest_mxperf.measuring.measure import MeasureConfig, Measurement
from pytest_mxperf.measuring.memory import MemoryMethod, MemoryRecord
from pytest_mxperf.measuring.protocol import PrepareSpec
from pytest_mxperf.measuring.records import CaseResult, Outcome, Verdict
from pytest_mxperf.measuring.runner import run_case
from pytest_mxperf.system import codec
from pytest_mxperf.testing import FakeBackend, FakeContext, FakeModel, measurement_of

CONFIG = MeasureConfig(min_time=0.5, max_time=1.0, warmup_time=1.0)


def spec() -> PrepareSpec:
    return PrepareSpec(mode="inference", batch_size=8, ctx=FakeContext("cpu"))


def model() -> FakeModel:
    return FakeModel(100.0, jitter=0.02, operators={"Convolution": (2, 0.7), "Pooling": (1, 0.3)})


def measured_steps(m: Measurement) -> int:
    return m.warmup_steps + len(m.block_seconds) * m.steps_per_block


@pytest.mark.parametrize("attempts", [1, 3])
def test_profiling_runs_after_the_timed_blocks_and_changes_no_figure(
    tmp_path: Path, attempts: int
) -> None:
    plain_backend, profiled_backend = FakeBackend(), FakeBackend()
    plain = run_case(
        plain_backend, model(), spec(), CONFIG, attempts=attempts, again=lambda m: True
    )
    trace = tmp_path / "case.trace.json"
    profiled = run_case(
        profiled_backend,
        model(),
        spec(),
        CONFIG,
        attempts=attempts,
        again=lambda m: True,
        diagnose=DiagnoseSpec(trace_path=trace, profile_if=lambda m: True),
    )
    # A/A: the same figures, block for block, with profiling on.
    assert plain.attempts == profiled.attempts
    assert profiled.measurement is not None and plain.measurement is not None
    assert profiled.measurement.block_seconds == plain.measurement.block_seconds
    assert profiled.diagnosis.profile is not None and profiled.diagnosis.profile_error is None
    # The call log: no step ran under the profiler until every measured step was done.
    steps = [on for kind, *on in profiled_backend.log if kind == "step" for on in on]
    first_profiled = steps.index(True)
    assert not any(steps[:first_profiled]) and all(steps[first_profiled:])
    assert first_profiled == len(plain_backend.log) - plain_backend.log.count(("sync",))
    calls = [c for c in profiled_backend.log if c[0] == "profiler"]
    assert ("profiler", "set_state(run)") in calls
    assert profiled_backend.mx is not None
    assert profiled_backend.mx.profiler.running is False  # left stopped
    assert profiled.diagnosis.profile.steps == len(steps) - first_profiled
    if attempts == 1:
        assert first_profiled == measured_steps(plain.measurement)


def test_profile_off_unless_asked() -> None:
    backend = FakeBackend()
    run = run_case(backend, model(), spec(), CONFIG, diagnose=DiagnoseSpec())
    assert run.diagnosis.profile is None and run.diagnosis.profile_error is None
    assert not [c for c in backend.log if c[0] == "profiler"]
    # memory is always taken: the fake declares it
    assert run.diagnosis.memory == MemoryRecord(64.0, MemoryMethod.DECLARED, "cpu")


def test_trace_file_loads_as_chrome_trace(tmp_path: Path) -> None:
    trace = diagnosis.trace_path_for(str(tmp_path), CaseKey.parse("toy/inference/float32/bs8/cpu"))
    assert trace is not None and trace.name.endswith(".trace.json") and "/" not in trace.name
    run = run_case(FakeBackend(), model(), spec(), CONFIG, diagnose=DiagnoseSpec(trace_path=trace))
    data = json.loads(trace.read_text())
    names = {e["name"] for e in data["traceEvents"] if e.get("ph") == "X"}
    assert names == {"Convolution", "Pooling"}
    assert run.diagnosis.trace is not None
    assert "Convolution" in run.diagnosis.trace.table.read_text()


def test_failing_profiler_loses_no_result() -> None:
    backend = FakeBackend()
    assert backend.mx is not None
    backend.mx.profiler.fail = RuntimeError("this build has no profiler")
    run = run_case(
        backend, model(), spec(), CONFIG, diagnose=DiagnoseSpec(profile_if=lambda m: True)
    )
    assert run.measurement is not None and run.measurement.items_per_sec > 0
    assert run.diagnosis.profile is None
    assert run.diagnosis.profile_error is not None
    assert "this build has no profiler" in run.diagnosis.profile_error
    lines = evidence_lines.operator_lines(None, None, run.diagnosis.profile_error, None)
    assert lines[0].startswith("top operators: profile unavailable: ")


def test_back_end_without_profiler() -> None:
    backend = FakeBackend()
    backend.mx = None
    run = run_case(
        backend, model(), spec(), CONFIG, diagnose=DiagnoseSpec(profile_if=lambda m: True)
    )
    assert run.diagnosis.profile_error == "this back end has no MXNet profiler"


def _result(peak: float | None) -> CaseResult:
    return CaseResult(
        CaseKey("toy", "inference", "float32", 8, "cpu"),
        "cpu(0)",
        "cpu-x",
        measurement=measurement_of(100.0),
        memory=None if peak is None else MemoryRecord(peak, MemoryMethod.VMHWM, "cpu"),
    )


def test_memory_growth_warns_and_fails_only_when_strict_or_above_the_marker() -> None:
    passing = Verdict(Outcome.PASS, False, ("toy: 100 img/s",))
    lines = passing.lines
    m = diagnosis.judge_memory(
        passing, lines, _result(200.0), 100.0, tolerance=0.1, strict=False, max_memory_mb=None
    )
    assert not m.fails and m.memory_trend == "grew" and m.lines == lines
    assert m.warning is not None and "peak memory grew: 100.0 -> 200.0 MiB (+100%)" in m.warning
    m = diagnosis.judge_memory(
        passing, lines, _result(200.0), 100.0, tolerance=0.1, strict=True, max_memory_mb=None
    )
    assert m.fails and m.warning is None
    assert m.lines[0].startswith("toy/inference/float32/bs8/cpu: peak memory grew")
    assert m.lines[1:] == lines
    m = diagnosis.judge_memory(
        passing, lines, _result(105.0), 100.0, tolerance=0.1, strict=True, max_memory_mb=None
    )
    assert not m.fails and m.memory_trend == "same"
    m = diagnosis.judge_memory(
        passing, lines, _result(105.0), None, tolerance=0.1, strict=False, max_memory_mb=100.0
    )
    assert m.fails and "above the marker's max_memory_mb=100" in "\n".join(m.lines)
    assert m.max_memory_mb == 100.0 and m.baseline_memory_mb is None
    regressed = Verdict(Outcome.REGRESSED, True, ("toy: slower",))
    m = diagnosis.judge_memory(
        regressed,
        regressed.lines,
        _result(300.0),
        100.0,
        tolerance=0.1,
        strict=True,
        max_memory_mb=None,
    )
    assert not m.fails and m.lines[-1].endswith("tolerance 10% and at least 16 MiB")


def test_startup_growth_is_flagged_not_failed() -> None:
    r = _result(None)
    assert r.measurement is not None  # first step 0.1 s, warm-up 0.5 s
    flags = diagnosis.judge_startup(r.measurement, 0.02, 0.5)
    assert flags == ("first step: 20 ms -> 100 ms (5.0x)",)
    assert diagnosis.judge_startup(r.measurement, 0.08, 0.4) == ()
    assert diagnosis.judge_startup(None, 0.08, 0.4) is None
    v = Verdict(Outcome.PASS, False, startup=flags)
    back = codec.from_dict(Verdict, json.loads(json.dumps(codec.to_dict(v))))
    assert back == v


def test_evidence_order() -> None:
    message = "\n".join(
        [
            "toy: 80 img/s vs baseline 100 img/s (-20.0%)",
            "changed since the baseline: mxnet: 1.9.0 -> 1.9.1",
            "confirmed by a paired run on this machine: ...",
        ]
    )
    out = evidence_lines.with_evidence(
        message.splitlines(), ["top operators ..."], ["peak memory: ..."], [], ["commits since ..."]
    )
    assert list(out) == [
        "toy: 80 img/s vs baseline 100 img/s (-20.0%)",
        "confirmed by a paired run on this machine: ...",
        "top operators ...",
        "peak memory: ...",
        "changed since the baseline: mxnet: 1.9.0 -> 1.9.1",
        "commits since ...",
    ]


def test_case_result_keeps_memory_and_profiles_through_json() -> None:
    profile = {"steps": 3, "items_per_step": 8, "operators": [], "storage_max_kb": {}}
    r = replace(
        _result(123.0), profile=profile, baseline_profile=dict(profile, steps=4), profile_error=None
    )
    data = json.loads(json.dumps(codec.to_dict(r)))
    assert data["peak_memory_mb"] == 123.0 and data["memory"]["method"] == "vmhwm"
    back = codec.from_dict(CaseResult, data)
    assert back.memory == r.memory and back.baseline_profile == r.baseline_profile


def test_commit_paths(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests" / "perf").mkdir(parents=True)
    (tmp_path / "tests" / "conftest.py").write_text("")
    (tmp_path / "conftest.py").write_text("")
    test = tmp_path / "tests" / "perf" / "test_x.py"
    test.write_text("")
    assert evidence_lines.commit_paths(str(tmp_path), str(test)) == [
        "conftest.py",
        "pkg",
        "tests/conftest.py",
        "tests/perf",
    ]
