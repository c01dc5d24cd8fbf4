"""A baseline file's calibration field: read, checked by name, merged run by run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_mxperf.baselines import store
from pytest_mxperf.baselines.calibration import PROBE, RUNS_KEPT, Calibration, first

COMMIT = {"sha": "a" * 40, "date": "2026-11-26T00:00:00+00:00"}
CASE = {"images_per_sec": 100.0, "status": "ok"}


def test_runs_accumulate_up_to_the_kept_few_and_the_figure_is_their_median(
    tmp_path: Path,
) -> None:
    for i, figure in enumerate([900.0, 1000.0, 1100.0, 950.0, 1050.0, 700.0]):
        path = store.store(
            tmp_path, "cpu-x-2c", COMMIT, {"k/inference/float32/bs8/cpu": CASE}, figure
        )
        calib = store.load(path).calibration
        assert calib is not None and calib.probe == PROBE
        assert len(calib.runs) == min(i + 1, RUNS_KEPT)
    assert calib is not None
    assert calib.runs == (1000.0, 1100.0, 950.0, 1050.0, 700.0)
    assert calib.images_per_sec == 1000.0
    # An update without a probe figure (no case measured on that device) keeps what is there.
    path = store.store(tmp_path, "cpu-x-2c", COMMIT, {"k/inference/float32/bs8/cpu": CASE})
    assert store.load(path).calibration == calib


def test_another_probes_figure_is_not_comparable_and_is_replaced() -> None:
    old = Calibration("matmul-v0", (5.0, 6.0))
    assert not old.comparable()
    assert old.with_run(1000.0) == first(1000.0)


def test_a_file_without_calibration_has_none(tmp_path: Path) -> None:
    path = store.store(tmp_path, "cpu-x-2c", COMMIT, {"k/inference/float32/bs8/cpu": CASE})
    assert store.load(path).calibration is None
    assert "calibration" not in json.loads(path.read_text())


@pytest.mark.parametrize(
    ("field", "says"),
    [
        ([1000.0], "'calibration' must be an object"),
        ({"runs": [1.0]}, "'calibration.probe' must be a name"),
        ({"probe": PROBE, "runs": []}, "'calibration.runs' must be a list of numbers"),
        ({"probe": PROBE, "runs": ["fast"]}, "'calibration.runs' holds 'fast', not a number"),
        ({"probe": PROBE, "runs": [-3.0]}, "'calibration.runs' holds -3.0, not > 0"),
        ({"probe": PROBE, "runs": [True]}, "'calibration.runs' holds True, not a number"),
    ],
)
def test_a_bad_calibration_field_is_named_and_the_file_never_overwritten(
    tmp_path: Path, field: object, says: str
) -> None:
    path = store.store(tmp_path, "cpu-x-2c", COMMIT, {"k/inference/float32/bs8/cpu": CASE}, 1.0)
    data = json.loads(path.read_text())
    data["calibration"] = field
    path.write_text(json.dumps(data))
    with pytest.raises(store.BaselineError, match=f"{path}.*{says}"):
        store.load(path)
    with pytest.raises(store.BaselineError):
        store.store(tmp_path, "cpu-x-2c", COMMIT, {"k/inference/float32/bs8/cpu": CASE}, 2.0)
    assert json.loads(path.read_text())["calibration"] == field
