"""Operator profiles without MXNet: parsing, the diff, its rendered lines, failure paths."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_mxperf.profiles.profile_diff import diff_profiles, operator_label
from pytest_mxperf.profiles.profile_record import (
    OperatorProfile,
    OperatorStat,
    ProfileUnavailable,
    parse_aggregate_json,
)
from pytest_mxperf.profiles.profile_render import render_diff
from pytest_mxperf.profiles.profile_trace import read_trace_events, table_path_for
from pytest_mxperf.profiles.profiling import profile_step, safe_case_name


def prof(ops: dict[str, tuple[int, float]], steps: int = 10, items: int = 4) -> OperatorProfile:
    return OperatorProfile(
        tuple(OperatorStat(name, "operator", c, ms) for name, (c, ms) in ops.items()),
        steps=steps,
        items_per_step=items,
    )


BEFORE = prof({"Convolution": (120, 31.0), "FullyConnected": (10, 20.0), "Pooling": (10, 5.0)})


def test_render_grown_operator_first_with_counts_times_and_share() -> None:
    after = prof({"Convolution": (240, 63.0), "FullyConnected": (10, 20.5), "Pooling": (10, 5.0)})
    lines = render_diff(diff_profiles(BEFORE, after))
    assert lines == [
        "operator time: 5.60 -> 8.85 ms/step (+58%)",
        "runs per step: Convolution 12 -> 24",
        "Convolution: 12 -> 24 per step, 3.10 -> 6.30 ms/step (+103%), 98% of the change",
    ]  # FullyConnected's +0.05 ms/step is under 2% of the total: noise, not listed


def test_new_and_gone_operators() -> None:
    after = prof(
        {"Convolution": (120, 31.0), "FullyConnected": (10, 20.0), "Dropout": (10, 8.0)},
    )
    diff = diff_profiles(BEFORE, after)
    assert [c.name for c in diff.new] == ["Dropout"]
    assert [c.name for c in diff.gone] == ["Pooling"]
    assert diff.changes[0].name == "Dropout"
    assert diff.changes[-1].name == "Pooling"
    assert render_diff(diff) == [
        "operator time: 5.60 -> 5.90 ms/step (+5%)",
        "runs per step: Dropout 0 -> 1, Pooling 1 -> 0",
        "new: Dropout: 1 per step, 0.80 ms/step, 267% of the change",
        "gone: Pooling",
    ]


def test_tiny_new_operator_still_named() -> None:
    after = prof({**{k: (o.count, o.total_ms) for k, o in _ops(BEFORE)}, "Cast": (10, 0.01)})
    lines = render_diff(diff_profiles(BEFORE, after))
    assert lines[-1] == "new: Cast"


def _ops(p: OperatorProfile) -> list[tuple[str, OperatorStat]]:
    return [(o.name, o) for o in p.operators]


def test_normalized_per_step_and_per_image() -> None:
    # Same work per image, different number of profiled steps and batch: nothing changed.
    before = prof({"Convolution": (10, 10.0)}, steps=10, items=4)
    after = prof({"Convolution": (20, 40.0)}, steps=20, items=8)
    diff = diff_profiles(before, after)
    (change,) = diff.changes
    assert change.ms_per_item_before == pytest.approx(0.25)
    assert change.ms_per_item_after == pytest.approx(0.25)
    assert change.ms_per_step_after == pytest.approx(2.0)
    assert change.count_per_step_after == 1
    assert change.ms_per_item_growth == pytest.approx(0.0)
    assert not diff.same_items_per_step
    assert render_diff(diff) == ["operator time: 0.25 -> 0.25 ms/image (+0%)"]


def test_fused_block_that_gained_a_member_is_one_change() -> None:
    # oneDNN names a fused subgraph after its members; an added conv renames the block.
    before = prof({"Activation,Convolution,FullyConnected": (10, 10.0), "Pooling": (10, 2.0)})
    after = prof(
        {"Activation,Convolution,Convolution,FullyConnected": (10, 18.0), "Pooling": (10, 2.0)}
    )
    diff = diff_profiles(before, after)
    first = diff.changes[0]
    assert first.status == "regrouped"
    assert first.added == ("Convolution",)
    assert first.before_name == "Activation,Convolution,FullyConnected"
    assert diff.new == () and diff.gone == ()
    assert render_diff(diff) == [
        "operator time: 1.20 -> 2.00 ms/step (+67%)",
        "runs per step: Convolution 1 -> 2",
        "fused(Activation, Convolution x2, FullyConnected), gained Convolution: "
        "1 -> 1 per step, 1.00 -> 1.80 ms/step (+80%), 100% of the change",
    ]


def test_operator_label() -> None:
    assert operator_label("Convolution") == "Convolution"
    assert (
        operator_label("Activation,Convolution,Activation") == "fused(Activation x2, Convolution)"
    )


#: A fused entry as MXNet 1.9.1 names it when its member list passes 127 characters: cut there,
#: mid-word (its profiler keeps names in a 128-byte buffer).
CUT = ",".join(["Convolution", "BatchNorm", "Activation"] * 6)[:127]


def test_a_name_mxnet_cut_is_never_shown_cut_mid_word() -> None:
    assert CUT.endswith(",Activa")  # MXNet's cut
    assert operator_label(CUT) == "fused(Convolution x4, BatchNorm x4, Activation x3, …)"
    single = "_sg_mkldnn_conv_bn_relu_" * 6
    assert operator_label(single[:127]) == single[:127].rsplit("_", 1)[0] + "…"
    # In the profile lines too: a new fused entry, and the per-operator run counts.
    lines = render_diff(diff_profiles(BEFORE, prof({**dict(_raw(BEFORE)), CUT: (10, 40.0)})))
    text = "\n".join(lines)
    assert "fused(Convolution x4, BatchNorm x4, Activation x3, …)" in text
    assert "Activa," not in text and "Activa)" not in text and "Activa " not in text


def _raw(p: OperatorProfile) -> list[tuple[str, tuple[int, float]]]:
    return [(o.name, (o.count, o.total_ms)) for o in p.operators]


def test_top_limits_lines() -> None:
    many_before = prof({f"op{i}": (10, 1.0) for i in range(8)})
    many_after = prof({f"op{i}": (10, 1.0 + i) for i in range(8)})
    lines = render_diff(diff_profiles(many_before, many_after), top=3)
    assert [line.split(":")[0] for line in lines[1:]] == ["op7", "op6", "op5"]


def test_profile_round_trips_through_json() -> None:
    p = OperatorProfile(
        (OperatorStat("Convolution", "operator", 3, 1.5),),
        steps=3,
        items_per_step=4,
        storage_max_kb=(("cpu/0", 211.5),),
    )
    assert OperatorProfile.from_dict(json.loads(json.dumps(p.as_dict()))) == p
    with pytest.raises(ValueError, match="not an operator profile"):
        OperatorProfile.from_dict({"steps": 1})


AGGREGATE = {
    "Time": {
        "MXNET_C_API": {
            "MXNDArrayFree": {"Count": 5, "Total": 0.001, "Min": 0, "Max": 0, "Avg": 0}
        },
        "operator": {
            "Convolution": {"Count": 5, "Total": 0.535, "Min": 0.05, "Max": 0.2, "Avg": 0.107},
            "Activation,Convolution": {"Count": 5, "Total": 0.873, "Min": 0, "Max": 1, "Avg": 0},
        },
    },
    "Memory": {
        "Device Storage": {"Memory: cpu/0": {"Count": 16, "Min": 0, "Max": 211.5, "Avg": 105.7}}
    },
    "Unit": {"Time": "ms", "Memory": "kB"},
}


def test_parse_aggregate_json() -> None:
    p = parse_aggregate_json(json.dumps(AGGREGATE), steps=5, items_per_step=4)
    ops = {(o.category, o.name): (o.count, o.total_ms) for o in p.operators}
    assert ops[("operator", "Convolution")] == (5, 0.535)
    assert ops[("MXNET_C_API", "MXNDArrayFree")] == (5, 0.001)
    assert p.storage_max_kb == (("cpu/0", 211.5),)


def test_parse_converts_microseconds() -> None:
    data = {**AGGREGATE, "Unit": {"Time": "us"}}
    p = parse_aggregate_json(json.dumps(data), steps=5, items_per_step=4)
    conv = next(o for o in p.operators if o.name == "Convolution")
    assert conv.total_ms == pytest.approx(0.000535)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no statistics"),
        ("{not json", "not JSON"),
        (json.dumps({"Time": {"MXNET_C_API": {}}}), "no operators"),
        (json.dumps({**AGGREGATE, "Unit": {"Time": "fortnight"}}), "unknown unit"),
    ],
)
def test_parse_failures_are_unavailable(text: str, reason: str) -> None:
    with pytest.raises(ProfileUnavailable, match=reason):
        parse_aggregate_json(text, steps=1, items_per_step=1)


EVENT = '{"name": "Convolution", "cat": "operator", "ph": "B", "ts": 1, "pid": 0, "tid": 7}'


@pytest.mark.parametrize(
    "text",
    [
        # the process's first dump: header, no footer
        '{\n    "traceEvents": [\n' + EVENT + ",\n" + EVENT + "\n",
        # a later dump: bare events after a comma
        ",\n\n" + EVENT + ",\n\n" + EVENT + "\n",
        # a finished file (dump(finished=True)), should one ever be read
        '{"traceEvents": [' + EVENT + "," + EVENT + '\n    ],\n    "displayTimeUnit": "ms"\n}\n',
    ],
)
def test_read_trace_events_from_mxnet_fragments(tmp_path: Path, text: str) -> None:
    path = tmp_path / "events.json"
    path.write_text(text)
    events = read_trace_events(path)
    assert [e["name"] for e in events] == ["process_name", "Convolution", "Convolution"]
    assert events[0]["args"] == {"name": "operator"}


def test_read_trace_events_from_offset(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    stale = '{"traceEvents": [' + EVENT.replace("Convolution", "Stale")
    path.write_text(stale + ",\n" + EVENT)
    events = read_trace_events(path, offset=len(stale))
    assert [e["name"] for e in events if e["ph"] != "M"] == ["Convolution"]


def test_broken_trace_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(",\n{broken")
    with pytest.raises(ProfileUnavailable, match="not valid JSON"):
        read_trace_events(path)


def test_safe_case_name() -> None:
    assert safe_case_name("resnet18_v1-inference-float32-b32-cpu") == (
        "resnet18_v1-inference-float32-b32-cpu"
    )
    a, b = safe_case_name("net/inference b4"), safe_case_name("net_inference_b4")
    assert a != b and a.startswith("net_inference_b4-")
    assert "/" not in safe_case_name("../../etc/passwd")
    assert table_path_for(Path("d/x.trace.json")) == Path("d/x.table.txt")


# failure paths with a fake mx --------------------------------------------------------------------
class FakeMXNetError(Exception):
    pass


class FakeProfiler:
    """Records calls; ``fail_on`` names the call that raises, ``json`` what dumps returns."""

    def __init__(self, fail_on: str = "", json_text: str = json.dumps(AGGREGATE)) -> None:
        self.fail_on = fail_on
        self.json_text = json_text
        self.calls: list[str] = []
        self.state = "stop"

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail_on:
            raise FakeMXNetError(f"Traceback (most recent call last):\n  File x\n{name} broke")

    def set_config(self, **kw: Any) -> None:
        self._call("set_config")

    def set_state(self, state: str) -> None:
        self._call(f"set_state:{state}")
        self.state = state

    def dumps(self, reset: bool = False, format: str = "table", **kw: Any) -> str:
        self._call(f"dumps:{format}:{reset}")
        return self.json_text if format == "json" else "table"


def fake_mx(profiler: Any) -> Any:
    return SimpleNamespace(profiler=profiler)


def test_profile_with_fake_profiler() -> None:
    profiler = FakeProfiler()
    p = profile_step(lambda: None, lambda: None, 5, fake_mx(profiler), items_per_step=4)
    assert p.steps == 5 and p.items_per_step == 4
    assert profiler.state == "stop"
    assert profiler.calls[-1] == "dumps:table:True"  # left with its statistics cleared


def test_no_profiler_module_is_unavailable() -> None:
    with pytest.raises(ProfileUnavailable, match="no profiler"):
        profile_step(lambda: None, lambda: None, 1, SimpleNamespace())


@pytest.mark.parametrize("fail_on", ["set_config", "set_state:run", "dumps:json:True"])
def test_profiler_error_is_unavailable_and_leaves_it_stopped(fail_on: str) -> None:
    profiler = FakeProfiler(fail_on=fail_on)
    with pytest.raises(ProfileUnavailable) as info:
        profile_step(lambda: None, lambda: None, 2, fake_mx(profiler))
    assert info.value.reason.endswith(f"FakeMXNetError: {fail_on} broke")
    assert profiler.state == "stop"


def test_empty_dumps_is_unavailable() -> None:
    with pytest.raises(ProfileUnavailable, match="no statistics"):
        profile_step(lambda: None, lambda: None, 2, fake_mx(FakeProfiler(json_text="")))


def test_step_error_is_unavailable_and_leaves_it_stopped() -> None:
    profiler = FakeProfiler()

    def step() -> None:
        assert profiler.state == "run"
        raise MemoryError("out of memory")

    with pytest.raises(ProfileUnavailable, match="the step raised MemoryError: out of memory"):
        profile_step(step, lambda: None, 2, fake_mx(profiler))
    assert profiler.state == "stop"
    assert profiler.calls[-1] == "dumps:table:True"
