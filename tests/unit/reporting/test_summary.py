"""CI summaries: GitHub Markdown and github-action-benchmark's customBiggerIsBetter JSON."""

from __future__ import annotations

import json

from pytest_mxperf.reporting.summary import (
    UNIT,
    Row,
    to_benchmark_action,
    to_markdown,
    verdict_counts,
)

ROWS = [
    Row(
        "resnet50_v1/inference/float32/bs32/cpu",
        "resnet50_v1",
        "inference",
        "float32",
        32,
        "cpu",
        193.47,
        4.2,
        240.0,
        193.47 / 240.0 - 1,
        "regressed",
        hardware="cpu-xeon-8c",
    ),
    Row("vgg16/inference/float32/bs1/cpu", "vgg16", "inference", "float32", 1, "cpu",
        81.57, 1.0, 80.0, 81.57 / 80 - 1, "pass"),
    Row("alexnet/training/float32/bs1/cpu", "alexnet", "training", "float32", 1, "cpu",
        300.3, None, None, None, "new"),
    Row("vgg16/training/float32/bs256/gpu", "vgg16", "training", "float32", 256, "gpu(0)",
        None, None, 700.0, None, "oom"),
    Row("a|b/inference/float32/bs1/cpu", "a|b", "inference", "float32", 1, "cpu",
        10.0, 0.5, 10.0, 0.0, "pass"),
]  # fmt: skip


def test_markdown_table_and_verdict_line() -> None:
    text = to_markdown(ROWS)
    lines = text.splitlines()
    assert lines[0] == "### mxperf: throughput"
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + len(ROWS)
    # Every row has as many cells as the header (an escaped '|' does not split a cell).
    widths = {len(line.replace("\\|", "").split("|")) for line in table}
    assert widths == {10}
    assert (
        "| `resnet50_v1/inference/float32/bs32/cpu` | cpu | 32 | 193.5 | 4.2 | 240.0 | -19.4% | **regressed** |"
        in table
    )
    assert table[5].endswith("| gpu(0) | 256 | — | — | 700.0 | — | oom |")
    assert "`a\\|b/inference/float32/bs1/cpu`" in table[6]
    assert lines[-1] == "5 cases: 2 pass, 1 new, 1 oom, 1 regressed"


def test_verdict_counts() -> None:
    assert verdict_counts([]) == "0 cases"
    assert verdict_counts(ROWS[:1]) == "1 case: 1 regressed"


def test_benchmark_action_entries_have_the_fields_and_types() -> None:
    entries = to_benchmark_action(ROWS)
    json.dumps(entries)  # plain JSON
    # The OOM case has no value to give, so it is left out.
    assert [e["name"] for e in entries] == [
        "resnet50_v1/inference/float32/bs32/cpu [cpu-xeon-8c]",
        "vgg16/inference/float32/bs1/cpu",
        "alexnet/training/float32/bs1/cpu",
        "a|b/inference/float32/bs1/cpu",
    ]
    for entry in entries:
        assert set(entry) <= {"name", "unit", "value", "range", "extra"}
        assert {"name", "unit", "value"} <= set(entry)
        assert entry["unit"] == UNIT == "images/sec"
        assert isinstance(entry["value"], float)
        assert all(isinstance(entry[k], str) for k in ("name", "unit", "extra") if k in entry)
        if "range" in entry:
            assert isinstance(entry["range"], str) and entry["range"].startswith("± ")
    first = entries[0]
    assert first["value"] == 193.47
    assert first["range"] == "± 2.1"
    assert first["extra"].splitlines() == [
        "verdict: regressed",
        "batch size: 32",
        "device: cpu",
        "hardware: cpu-xeon-8c",
        "baseline: 240.0 images/sec",
        "change: -19.4%",
    ]
    assert "range" not in entries[2]
