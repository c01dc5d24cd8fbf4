"""A case's records are built once (issue #27, item 2): `CaseResult` and `Verdict` are frozen,
each step returns a new one; a verdict's message is rendered from its lines in one place; the
edges (JSON and transport, baseline files) convert once each way, typed on both sides."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pytest_mxperf.baselines.entry import BaselineRecord
from pytest_mxperf.baselines.store import load, store
from pytest_mxperf.case.pairs import unconfirmed
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.diagnosis import judge_memory
from pytest_mxperf.measuring.memory import MemoryMethod, MemoryRecord
from pytest_mxperf.measuring.records import CaseResult, Outcome, Scaling, Status, Verdict
from pytest_mxperf.measuring.verdicts import Judged, message_lines, render_message
from pytest_mxperf.system import codec
from pytest_mxperf.testing import measurement_of

KEY = CaseKey("toy", "training", "float32", 32, "cpu")
HW = "cpu-test-2c"


def _result(**fields: object) -> CaseResult:
    base = CaseResult(
        KEY,
        "cpu(0)",
        HW,
        measurement=measurement_of(100.0, 0.02),
        threads={"omp_threads": 2},
        software={"mxnet": "1.9.1"},
        environment={"OMP_NUM_THREADS": "2"},
        memory=MemoryRecord(120.0, MemoryMethod.VMHWM, "cpu"),
    )
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def test_a_case_result_and_its_verdict_cannot_be_written() -> None:
    result = _result(verdict=Verdict(Outcome.PASS, False).explained("toy: fine"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = Status.ERROR  # type: ignore[misc]
    assert result.verdict is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.verdict.lines = ("other",)  # type: ignore[misc]
    changed = dataclasses.replace(result, status=Status.NAN)
    assert changed.status == Status.NAN and result.status == Status.OK


def test_the_message_is_rendered_from_the_lines_in_order() -> None:
    v = Verdict(Outcome.REGRESSED, True).explained("toy: slower\nmeasured 2 times")
    more = v.adding("confirmed by a paired run", "top operators:\n  conv: 2 ms")
    assert more.lines == (
        "toy: slower",
        "measured 2 times",
        "confirmed by a paired run",
        "top operators:",
        "  conv: 2 ms",
    )
    assert more.message == render_message(more.lines) == "\n".join(more.lines)
    assert v.message == "toy: slower\nmeasured 2 times"  # each step made a new verdict
    # Any text comes back byte for byte, empty lines and all.
    for text in ("", "a", "a\n", "\nb\n\nc", "a\r\nb"):
        assert render_message(message_lines(text)) == text
    assert Verdict(Outcome.NEW, False).message == ""


def test_steps_return_new_verdicts_that_add_lines() -> None:
    stored = Verdict(Outcome.REGRESSED, True, change=-0.3, threshold=0.2).explained("toy: -30%")
    said = unconfirmed(Judged.of(stored), stored, "no git", False, [])
    assert said.verdict().lines == (
        "toy: -30%",
        "not confirmed by a paired run (no git): judged against the stored figure",
    )
    assert stored.lines == ("toy: -30%",)
    # A memory failure of a passing case leads the message; the old message follows it.
    passing = Verdict(Outcome.PASS, False).explained("toy: 100 img/s")
    m = judge_memory(
        passing, passing.lines, _result(), 100.0, tolerance=0.1, strict=True, max_memory_mb=None
    )
    assert m.fails
    assert m.lines[1:] == ("toy: 100 img/s",) and m.lines[0].startswith(f"{KEY}: ")


def test_json_and_transport_hold_the_rendered_message_and_convert_once_each_way() -> None:
    verdict = Verdict(Outcome.REGRESSED, True, change=-0.3).explained("toy: -30%\nwhy")
    result = _result(verdict=verdict, attempts=[90.0, 100.0], window=[1.0, 2.0])
    data = json.loads(json.dumps(codec.to_dict(result)))
    assert data["verdict"]["message"] == "toy: -30%\nwhy" and "lines" not in data["verdict"]
    back = codec.from_dict(CaseResult, data)
    assert back == result and back.verdict is not None
    assert back.verdict.lines == ("toy: -30%", "why")


def test_the_baseline_writer_and_reader_round_trip_a_typed_record(tmp_path: Path) -> None:
    scaling = Scaling(
        kvstore="device",
        world_size=2,
        single_images_per_sec=60.0,
        per_worker_images_per_sec=(50.0, 50.0),
        efficiency=0.83,
        comm_share=0.1,
        single_rel_iqr=0.01,
    )
    dp_key = CaseKey("toy", "training", "float32", 32, "cpu", "device", world_size=2)
    results = {str(KEY): _result(), str(dp_key): _result(key=dp_key, scaling=scaling)}
    records = {
        k: BaselineRecord.of(r, dirty=False, machine_id="m1", plugin_version="9.8.7")
        for k, r in results.items()
    }
    store(tmp_path, HW, {"sha": "a" * 40}, {k: r.as_dict() for k, r in records.items()})
    cases = load(tmp_path / HW / f"{'a' * 40}.json").cases
    for key, result in results.items():
        case, m = cases[key], result.measurement
        assert m is not None and result.memory is not None
        assert case.images_per_sec == pytest.approx(m.items_per_sec)
        assert case.rel_iqr == pytest.approx(m.rel_iqr)
        assert case.first_step_seconds == m.first_step_seconds
        assert case.warmup_seconds == m.warmup_seconds
        assert case.peak_memory_mb == result.memory.peak_mb
        assert (case.threads, case.software, case.environment) == (
            result.threads,
            result.software,
            result.environment,
        )
        assert case.machine_ids == ("m1",) and not case.dirty
        assert case.plugin_version == "9.8.7"
    assert cases[str(dp_key)].efficiency == 0.83 and cases[str(KEY)].efficiency is None
    assert cases[str(dp_key)].comm_share == 0.1
