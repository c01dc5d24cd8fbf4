"""The `Measurement` record: its figures and its round trips through dicts and JSON."""

from __future__ import annotations

from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.system import codec


def _sample() -> Measurement:
    return Measurement(
        items_per_step=4,
        steps_per_block=10,
        block_seconds=(0.5, 0.4, 0.25, 0.2, 0.8),
        warmup_steps=33,
        warmup_seconds=2.5,
        warmup_steady=True,
        first_step_seconds=1.25,
        sync_seconds=0.001,
        started_at=100.0,
        finished_at=110.0,
        extra={"form": "hybridized"},
    )


def test_measurement_values() -> None:
    m = _sample()
    # 40 items per block
    assert m.block_rates == [80.0, 100.0, 160.0, 200.0, 50.0]
    assert m.items_per_sec == 100.0  # median of 50, 80, 100, 160, 200
    assert m.iqr == 160.0 - 80.0
    assert m.rel_iqr == 0.8


def test_measurement_as_dict_from_dict_round_trip() -> None:
    m = _sample()
    data = codec.to_dict(m)
    assert data["images_per_sec"] == 100.0
    assert data["rel_iqr"] == 0.8
    assert data["iqr"] == 80.0
    assert data["block_images_per_sec"] == [80.0, 100.0, 160.0, 200.0, 50.0]
    assert data["block_seconds"] == [0.5, 0.4, 0.25, 0.2, 0.8]
    assert data["extra"] == {"form": "hybridized"}
    back = codec.from_dict(Measurement, data)
    assert back == m
    assert isinstance(back.block_seconds, tuple)


def test_measurement_round_trip_through_json() -> None:
    import json

    m = _sample()
    back = codec.from_dict(Measurement, json.loads(json.dumps(codec.to_dict(m))))
    assert back == m
    assert back.items_per_sec == m.items_per_sec
