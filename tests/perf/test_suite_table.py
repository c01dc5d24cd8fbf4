"""The suite's expectations reach the right cases, scoped to the right hardware (no MXNet)."""

from __future__ import annotations

import pytest
from marks import marks_for
from models import QUICK, Case, full

from pytest_mxperf.config.markers import merge, parse_marker

V100 = "gpu-tesla-v100-sxm2-16gb-x1"
K80 = "gpu-tesla-k80-x1"
C5_18XL = "cpu-intel-xeon-platinum-8124m-cpu-3-00ghz-72c"
C5_XL = "cpu-intel-xeon-platinum-8124m-cpu-3-00ghz-4c"
HERE = "cpu-amd-epyc-2c"


def expected(case: Case, hardware: str) -> list[float]:
    spec = merge(parse_marker(m.args, m.kwargs) for m in (d.mark for d in marks_for(case)))
    found = spec.matching(
        model=case.label,
        mode=case.mode,
        dtype=case.dtype,
        batch_size=case.batch_size,
        hardware=hardware,
    )
    return [e.images_per_sec for e in found]


@pytest.mark.parametrize(
    ("case", "hardware", "figures"),
    [
        (Case("resnet50_v1", "inference", 32, 224), V100, [1076.81]),
        (Case("resnet50_v1", "inference", 32, 224), K80, [159.42]),
        (Case("resnet50_v1", "inference", 32, 224), C5_18XL, [193.47]),
        (Case("resnet50_v1", "inference", 32, 224), C5_XL, [13.22]),
        (Case("resnet50_v1", "inference", 32, 224), HERE, []),
        (Case("resnet50_v1", "inference", 32, 224, "float16"), V100, [2085.51]),
        (Case("resnet50_v1", "inference", 32, 224, "float16"), K80, []),
        (Case("inception-bn", "inference", 8, 224), V100, [898.09]),
        (Case("inceptionv3", "training", 64, 299), V100, [247.43]),
        (Case("alexnet", "training", 16, 224), V100, [1629.52]),  # table batch 1, x16
        (Case("vgg16", "inference", 128, 224), V100, [703.30]),
        (Case("vgg16", "inference", 128, 224), K80, []),  # published OOM: nothing to expect
        (Case("resnet50_v1", "inference", 32, 64), V100, []),  # reduced size: not comparable
        (Case("resnet18_v1", "inference", 8, 224), V100, []),  # not in the published tables
    ],
)
def test_published_rows_reach_the_right_cases(
    case: Case, hardware: str, figures: list[float]
) -> None:
    assert expected(case, hardware) == figures


def test_quick_selection_runs_no_published_figure_on_a_two_core_cpu() -> None:
    assert all(expected(case, HERE) == [] for case in QUICK)


def test_full_selection_covers_every_published_figure() -> None:
    from expectations import TABLES, load

    covered = {(c.label, c.mode, c.dtype, c.published_batch) for c in full()}
    for fig in load():
        if TABLES[fig.table].layout != "grid":
            continue  # the SSD study's rows: GluonCV's SSD-300 cases (test_gluoncv.py)
        assert (fig.model, fig.mode, fig.dtype, fig.batch_size) in covered, fig


def test_full_sweeps_keep_published_figures_at_their_batch_sizes() -> None:
    from marks import marks_for
    from models import full_sweeps

    resnet = next(
        s
        for s in full_sweeps()
        if s.label == "resnet50_v1" and s.mode == "inference" and s.dtype == "float32"
    )
    marks = [m for c in resnet.points() for m in marks_for(c)]
    spec = merge(parse_marker(d.mark.args, d.mark.kwargs) for d in marks)
    found = spec.matching(
        model="resnet50_v1", mode="inference", dtype="float32", batch_size=32, hardware=V100
    )
    assert [e.images_per_sec for e in found] == [1076.81]
    alexnet = next(s for s in full_sweeps() if s.label == "alexnet" and s.mode == "training")
    assert (alexnet.start, alexnet.max_batch) == (16, 2048)
