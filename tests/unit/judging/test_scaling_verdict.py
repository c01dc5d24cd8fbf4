"""Data-parallel parts of the pure modules: the efficiency marker, the Scaling record on a
CaseResult (it travels through user_properties and a paired run's side output), stored
efficiency, and the scaling verdict."""

from __future__ import annotations

import json

import pytest

from pytest_mxperf.baselines.entry import BaselineRecord
from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.baselines.store import StoredCase
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.markers import MarkerError, merge, parse_marker
from pytest_mxperf.judging.decisions import Policy, decide, decide_scaling
from pytest_mxperf.measuring.records import CaseResult, Outcome, Scaling
from pytest_mxperf.system import codec
from pytest_mxperf.testing import fake_blocks

KEY = CaseKey("r50", "training", "float32", 32, "gpu", "nccl", world_size=4)


def scaled(efficiency: float, comm: float, rel: float = 0.0) -> CaseResult:
    single = 100.0
    return CaseResult(
        key=KEY,
        device="gpu(0,1,2,3)",
        hardware="gpu-v100-x4",
        measurement=fake_blocks(4 * single * efficiency, 128, rel),
        scaling=Scaling(
            kvstore="nccl",
            world_size=4,
            single_images_per_sec=single,
            per_worker_images_per_sec=(4 * single * efficiency,),
            efficiency=efficiency,
            comm_share=comm,
            single_rel_iqr=rel,
        ),
    )


def ref_of(result: CaseResult) -> BaselineRef:
    record = BaselineRecord.of(result, dirty=False).as_dict()
    case = StoredCase.from_dict(json.loads(json.dumps(record)), "test")
    return BaselineRef(case, {"sha": "c" * 40}, "f.json", "nearest ancestor", 1)


def test_efficiency_marker_parses_strictly() -> None:
    spec = merge([parse_marker((), {"efficiency": {2: 0.85, 8: 0.9}, "hardware": "gpu-*"})])
    assert spec.efficiency_floor(model="m", world_size=8, hardware="gpu-v100-x8") == 0.9
    assert spec.efficiency_floor(model="m", world_size=8, hardware="cpu-x") is None
    assert spec.efficiency_floor(model="m", world_size=4, hardware="gpu-v100-x4") is None
    for bad, match in (
        ({1: 0.9}, "world size must be an int >= 2"),
        ({"2": 0.9}, "world size"),
        ({2: 1.5}, r"fraction in \(0, 1\]"),
        ({2: True}, "fraction"),
        ([0.9], "must map world size"),
    ):
        with pytest.raises(MarkerError, match=match):
            parse_marker((), {"efficiency": bad})


def test_scaling_travels_with_the_case_result() -> None:
    result = scaled(0.9, 0.1)
    back = codec.from_dict(CaseResult, json.loads(json.dumps(codec.to_dict(result))))
    assert back.scaling == result.scaling
    assert str(back.key) == "r50/training/float32/bs32/gpu/x4/nccl"
    assert back.images_per_sec == pytest.approx(360.0)


def test_stored_efficiency_is_read_and_older_files_have_none() -> None:
    ref = ref_of(scaled(0.9, 0.1))
    assert ref.case.efficiency == pytest.approx(0.9) and ref.case.comm_share == 0.1
    assert ref.case.record["world_size"] == 4
    old = StoredCase.from_dict({"images_per_sec": 10.0}, "old")
    assert old.efficiency is None and old.comm_share is None


def test_a_drop_within_the_noise_is_no_scaling_regression() -> None:
    base = ref_of(scaled(0.9, 0.1, rel=0.05))
    now = scaled(0.85, 0.12, rel=0.05)  # -5.6%, noise ~7% -> threshold ~14%
    policy = Policy(tolerance=0.05)
    verdict = decide_scaling(decide(now, base, [], policy), now, base, None, policy)
    assert verdict.outcome == Outcome.PASS and not verdict.scaling
    assert verdict.efficiency_change == pytest.approx(0.85 / 0.9 - 1)


def test_a_clear_drop_is_a_scaling_regression_and_a_floor_wins_first() -> None:
    base = ref_of(scaled(0.9, 0.1))
    now = scaled(0.6, 0.4)
    policy = Policy(tolerance=0.05)
    verdict = decide_scaling(decide(now, base, [], policy), now, base, None, policy)
    assert verdict.outcome == Outcome.REGRESSED and verdict.failed and verdict.scaling
    assert verdict.baseline_comm_share == 0.1
    below = decide_scaling(decide(now, None, [], policy), now, None, 0.8, policy)
    assert below.outcome == Outcome.BELOW and below.efficiency_floor == 0.8
    update = Policy(tolerance=0.05, update=True)
    stored = decide_scaling(decide(now, base, [], update), now, base, None, update)
    assert stored.outcome == Outcome.REGRESSED and not stored.failed
