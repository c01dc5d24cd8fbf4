"""The history's arithmetic (changes marked against noise and tolerance) and expectation floors,
without git or a browser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_mxperf.config import floors
from pytest_mxperf.config.floors import Floor, FloorError, floor_for, parse_csv, parse_json
from pytest_mxperf.reporting.history import mark_changes
from pytest_mxperf.reporting.historygit import utc_text
from pytest_mxperf.reporting.historytypes import CommitRef, Mark, Point

EXPECTATIONS = Path(__file__).resolve().parents[2] / "perf" / "expectations.csv"


def point(rate: float | None, noise: float = 0.01, day: int = 1) -> Point:
    ref = CommitRef(f"{day:040x}", f"2025-01-{day:02d} 00:00:00", "", "main", False, day, "git")
    return Point(ref, rate, rate, rate, "", (), noise)


def marks(points: list[Point], tolerance: float = 0.2) -> list[Mark]:
    return [p.mark for p in mark_changes(points, tolerance)]


def test_changes_beyond_the_tolerance_are_marked() -> None:
    rates = [100.0, 119.0, 90.0, 71.0, 100.0]
    marked = mark_changes([point(r) for r in rates], 0.2)
    assert [p.mark for p in marked] == [
        Mark.NEW,
        Mark.PASS,  # +19%
        Mark.REGRESSED,  # -24.4%
        Mark.REGRESSED,  # -21.1%
        Mark.IMPROVED,  # +40.8%
    ]
    assert marked[2].change == pytest.approx(90 / 119 - 1)
    assert marked[2].threshold == pytest.approx(0.2)


def test_the_threshold_follows_the_noise_when_it_is_larger() -> None:
    # Noise 0.15 on either side: threshold 0.30, so a 25% drop is within the noise.
    assert marks([point(100.0, 0.15), point(75.0)]) == [Mark.NEW, Mark.PASS]
    assert marks([point(100.0), point(75.0, 0.15)]) == [Mark.NEW, Mark.PASS]
    assert marks([point(100.0, 0.15), point(65.0)]) == [Mark.NEW, Mark.REGRESSED]
    # The tolerance is a parameter.
    assert marks([point(100.0), point(90.0)], tolerance=0.05) == [Mark.NEW, Mark.REGRESSED]


def test_too_noisy_to_judge_and_out_of_memory() -> None:
    assert marks([point(100.0, 0.3), point(50.0)]) == [Mark.NEW, Mark.UNSTABLE]
    # An OOM point is shown, and the next figure is compared with the last one that had a figure.
    assert marks([point(100.0), point(None), point(70.0)]) == [
        Mark.NEW,
        Mark.OOM,
        Mark.REGRESSED,
    ]


def test_utc_text() -> None:
    assert utc_text("2025-03-01T12:00:00+01:00") == "2025-03-01 11:00:00"
    assert utc_text("2025-03-01T12:00:00Z") == "2025-03-01 12:00:00"
    assert utc_text("2025-03-01T12:00:00") == "2025-03-01 12:00:00"
    assert utc_text("not a date") == "not a date"


def test_floors_from_this_repository_expectations_csv() -> None:
    found = floors.load(EXPECTATIONS)
    data_rows = [
        line
        for line in EXPECTATIONS.read_text().splitlines()
        if line and not line.startswith("#") and not line.startswith("table,")
    ]
    oom = sum(line.endswith(",OOM") for line in data_rows)
    several = sum(line.split(",")[6] != "1" for line in data_rows)  # devices: no floor
    assert len(found) == len(data_rows) - oom - several > 100
    v100 = floor_for(
        found, "gpu-tesla-v100-sxm2-16gb-x1", "resnet50_v1", "inference", "float32", 32
    )
    assert v100 == 1076.81
    fp16 = floor_for(
        found, "gpu-tesla-v100-sxm2-16gb-x1", "resnet50_v1", "inference", "float16", 32
    )
    assert fp16 == 2085.51
    assert floor_for(found, "cpu-amd-epyc-2c", "resnet50_v1", "inference", "float32", 32) is None


def test_floor_csv_with_optional_columns() -> None:
    found = parse_csv("# floors\nmodel,batch_size,images_per_sec\nresnet18_v1,8,50\n")
    assert found == [Floor("resnet18_v1", 8, 50.0)]
    assert floor_for(found, "any-hw", "resnet18_v1", "training", "float16", 8) == 50.0
    assert floor_for(found, "any-hw", "resnet18_v1", "training", "float16", 16) is None


def test_floor_json_forms_and_errors() -> None:
    row = {"hardware": "cpu-*", "model": "m", "batch_size": 1, "images_per_sec": 10}
    assert parse_json(json.dumps({"floors": [row]})) == [Floor("m", 1, 10.0, hardware="cpu-*")]
    with pytest.raises(FloorError, match=r"x.json\[0\]: images_per_sec must be > 0"):
        parse_json('[{"model": "m", "batch_size": 1, "images_per_sec": -1}]', "x.json")
    with pytest.raises(FloorError, match="expected a list"):
        parse_json('{"model": "m"}')
    with pytest.raises(FloorError, match=r"f.csv:3: images_per_sec and batch_size must be"):
        parse_csv("model,batch_size,images_per_sec\n\nm,one,3\n", "f.csv")


def test_highest_matching_floor_wins() -> None:
    found = [Floor("m", 1, 10.0), Floor("m", 1, 12.0, hardware="cpu-*")]
    assert floor_for(found, "cpu-x", "m", "inference", "float32", 1) == 12.0
    assert floor_for(found, "gpu-x", "m", "inference", "float32", 1) == 10.0
