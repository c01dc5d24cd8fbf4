"""HEAD's figures of a case in a paired run: the round with the median img/s, and an end-to-end
case's model-alone and pipeline-alone figures from the first round, which a side's later rounds
leave out (`pytest_mxperf.pipelines.timing.run_end_to_end`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_mxperf.case import pairs
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.pipelines.timing import ALONE_FIGURES
from pytest_mxperf.testing import measurement_of

E2E = CaseKey("tiny", "training", "float32", 32, "cpu", "e2e")
ALONE = {
    "model_alone": {"images_per_sec": 1500.0, "rel_iqr": 0.02},
    "pipeline_alone": {"images_per_sec": 600.0, "rel_iqr": 0.03},
}


def _head(rate: float, **extra: Any) -> CaseResult:
    m = dataclasses.replace(measurement_of(rate, 0.02), extra=extra)
    return CaseResult(E2E, "cpu(0)", "cpu-test-2c", measurement=m)


def test_a_later_rounds_median_gets_the_first_rounds_alone_figures() -> None:
    heads = [
        _head(500.0, form="end-to-end", **ALONE),  # the first round measured them
        _head(560.0, form="end-to-end"),
        _head(540.0, form="end-to-end"),
    ]
    m = pairs._middle(heads)["measurement"]
    median = heads[2].measurement
    assert m is not None and median is not None
    assert m.block_seconds == median.block_seconds  # the median round's figure
    assert {name: m.extra[name] for name in ALONE_FIGURES} == ALONE
    assert m.extra["form"] == "end-to-end"
    assert ALONE_FIGURES[0] not in median.extra  # the side's record untouched


def test_a_rounds_own_alone_figures_and_other_cases_are_kept_as_measured() -> None:
    own = {"model_alone": {"images_per_sec": 1400.0, "rel_iqr": 0.01}, "pipeline_alone": None}
    heads = [_head(500.0, form="end-to-end", **ALONE), _head(520.0, form="end-to-end", **own)]
    assert pairs._middle(heads)["measurement"].extra["model_alone"] == own["model_alone"]
    plain = [_head(100.0), _head(110.0), _head(105.0)]
    assert pairs._middle(plain)["measurement"] is plain[2].measurement
    # No round of an end-to-end case measured them (a side that failed its first round's).
    bare = [_head(500.0, form="end-to-end"), _head(510.0, form="end-to-end")]
    assert pairs._middle(bare)["measurement"] is bare[1].measurement
