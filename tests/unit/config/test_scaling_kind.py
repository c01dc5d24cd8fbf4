"""Weak and strong scaling of a data-parallel case, without MXNet: the vocabulary, the split of a
strong case's total batch, the one-device reference each kind compares with, the efficiency
arithmetic, the records and the marker."""

from __future__ import annotations

import pytest

from pytest_mxperf.config.markers import MarkerError, merge, parse_marker
from pytest_mxperf.config.scaling_kind import check_kind, resolve_kind, split_batch
from pytest_mxperf.judging.explain_scaling import scaling_summary
from pytest_mxperf.measuring.dp_scaling import DataParallelSpec
from pytest_mxperf.measuring.records import Scaling
from pytest_mxperf.system import codec
from pytest_mxperf.testing import FakeModel, fake_data_parallel


def spec(**kw: object) -> DataParallelSpec:
    fields: dict[str, object] = {
        "factory": "m:f",
        "batch_per_device": 8,
        "kvstore": "local",
        "contexts": ("cpu(0)", "cpu(1)", "cpu(2)", "cpu(3)"),
    }
    fields.update(kw)
    return DataParallelSpec(**fields)  # type: ignore[arg-type]


def test_kinds_and_how_call_and_marker_agree() -> None:
    assert check_kind("strong") == "strong"
    with pytest.raises(ValueError, match="scaling must be one of 'weak', 'strong', got 'linear'"):
        check_kind("linear")
    assert resolve_kind(None, None) == "weak"
    assert resolve_kind("strong", None) == "strong"
    assert resolve_kind(None, "strong") == "strong"
    assert resolve_kind("weak", "weak") == "weak"
    with pytest.raises(ValueError, match=r"scaling='weak'.*marker says scaling='strong'"):
        resolve_kind("weak", "strong")


def test_split_batch_names_the_numbers() -> None:
    assert split_batch(32, 4) == 8
    with pytest.raises(ValueError, match=r"batch_size=30 over 4 devices.*30 / 4 = 7\.5"):
        split_batch(30, 4)
    with pytest.raises(ValueError, match="batch_size=2 over 4 devices"):
        split_batch(2, 4)


def test_strong_in_process_splits_the_total_at_every_world_size() -> None:
    strong = spec().split(32)
    assert (strong.scaling, strong.batch_per_device, strong.total_batch) == ("strong", 8, 32)
    assert [strong.with_world(n).batch_per_device for n in (1, 2, 4)] == [32, 16, 8]
    assert {strong.with_world(n).total_batch for n in (1, 2, 4)} == {32}
    weak = spec()
    assert [weak.with_world(n).batch_per_device for n in (1, 2, 4)] == [8, 8, 8]
    assert [weak.with_world(n).total_batch for n in (1, 2, 4)] == [8, 16, 32]


def test_strong_dist_splits_over_every_device_of_every_worker() -> None:
    dist = spec(kvstore="dist_sync", workers=2, contexts=("cpu(0)", "cpu(1)")).split(32)
    assert (dist.devices, dist.batch_per_device) == (4, 8)
    one = dist.with_world(1)  # one worker, its two devices, the whole total
    assert (one.workers, one.devices, one.batch_per_device) == (1, 2, 16)


def test_strong_total_that_does_not_divide_is_refused() -> None:
    with pytest.raises(ValueError, match=r"batch_size=32 over 3 devices"):
        spec(contexts=("cpu(0)", "cpu(1)", "cpu(2)")).split(32)
    with pytest.raises(ValueError, match="scaling"):
        spec(scaling="linear")


def test_the_spec_round_trips_its_kind() -> None:
    strong = spec().split(32)
    assert DataParallelSpec.from_dict(strong.as_dict()) == strong


def test_strong_result_compares_with_one_device_at_the_total() -> None:
    result = fake_data_parallel(
        FakeModel(300.0, scaling=0.8), spec(contexts=("cpu(0)", "cpu(1)")).split(32)
    )
    # The one-device run trained the whole 32 a step, the two devices 16 each.
    assert result.single.workers[0].full.items_per_step == 32
    assert result.scaled.workers[0].full.items_per_step == 32  # one process, both devices
    assert result.efficiency == pytest.approx(0.8)
    assert result.speedup == pytest.approx(1.6)
    s = result.scaling()
    assert (s.kind, s.batch_per_device, s.single_batch_per_device, s.total_batch) == (
        "strong",
        16,
        32,
        32,
    )
    data = result.as_dict()
    assert data["scaling"] == "strong" and data["total_batch"] == 32
    assert data["single_batch_per_device"] == 32
    assert result.aggregate_measurement().extra["scaling"] == "strong"


def test_weak_result_keeps_its_reference() -> None:
    result = fake_data_parallel(FakeModel(300.0, scaling=0.9), spec(contexts=("cpu(0)", "cpu(1)")))
    assert result.single.workers[0].full.items_per_step == 8
    s = result.scaling()
    assert (s.kind, s.batch_per_device, s.single_batch_per_device, s.total_batch) == (
        "weak",
        8,
        8,
        16,
    )


def test_the_efficiency_arithmetic_of_each_kind() -> None:
    """The SSD study's Titan X run, 2 GPUs at 16 each: 99.5% against one GPU at 16 (weak),
    88.1% against one GPU at the whole 32 (strong, a speed-up of 1.76)."""
    from pytest_mxperf.measuring.dp_scaling import efficiency

    assert efficiency(35.57, 70.8, 2) == pytest.approx(0.9952, abs=1e-4)
    assert efficiency(40.2, 70.8, 2) == pytest.approx(0.8806, abs=1e-4)
    assert efficiency(40.2, 110.0, 4) == pytest.approx(0.6841, abs=1e-4)


def test_old_records_read_as_weak() -> None:
    s = codec.from_dict(
        Scaling,
        {
            "kvstore": "local",
            "world_size": 2,
            "single_images_per_sec": 1.0,
            "per_worker_images_per_sec": [2.0],
            "efficiency": 1.0,
            "comm_share": 0.0,
        },
    )
    assert (s.kind, s.batch_per_device, s.total_batch) == ("weak", 0, 0)


def test_the_summary_says_strong_and_its_speedup() -> None:
    s = Scaling(
        "local",
        2,
        40.2,
        (70.8,),
        70.8 / 80.4,
        0.1,
        kind="strong",
        batch_per_device=16,
        single_batch_per_device=32,
        total_batch=32,
    )
    text = scaling_summary(s)
    assert text.startswith("local x2 strong scaling (total batch 32, 16 per device): 70.8 img/s")
    assert "speed-up 1.76, efficiency 88.1%" in text
    weak = Scaling("local", 2, 35.57, (70.8,), 70.8 / 71.14, 0.1)
    assert scaling_summary(weak).startswith("local x2: 70.8 img/s aggregate")
    assert "speed-up" not in scaling_summary(weak)


def test_the_marker_says_the_kind() -> None:
    assert parse_marker((), {"scaling": "strong", "efficiency": {2: 0.8}}).scaling == "strong"
    assert parse_marker((), {}).scaling is None
    with pytest.raises(MarkerError, match="scaling must be one of"):
        parse_marker((), {"scaling": "both"})
    one = parse_marker((), {"scaling": "strong", "hardware": "gpu-*"})
    other = parse_marker((), {"efficiency": {2: 0.5}})
    assert merge([other, one]).scaling == "strong"
    with pytest.raises(MarkerError, match="scaling strong and weak"):
        merge([one, parse_marker((), {"scaling": "weak"})])
