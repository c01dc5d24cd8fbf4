"""Cost, % of peak and CI-summary rows in the report (pure), and the summaries' writers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_mxperf.baselines.runinfo import RunInfo
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.measuring.records import CaseResult, Outcome, Verdict
from pytest_mxperf.reporting import cost, summary
from pytest_mxperf.reporting.jsonreport import case_cost, peaks, summary_row
from pytest_mxperf.reporting.tables import render_table
from pytest_mxperf.run import outputs
from pytest_mxperf.run.session import MxperfSession
from pytest_mxperf.system import codec
from pytest_mxperf.testing import FakeBackend, measurement_of


def case(
    model: str = "resnet50_v1",
    rate: float | None = 400.0,
    macs: int | None = None,
    peak: float | None = None,
    mode: str = "inference",
) -> CaseResult:
    return CaseResult(
        key=CaseKey(model, mode, "float32", 32, "cpu"),
        device="cpu(0)",
        hardware="cpu-x-2c",
        measurement=None if rate is None else measurement_of(rate, 0.02),
        verdict=Verdict(Outcome.PASS, False, change=-0.01, baseline_images_per_sec=404.0),
        macs_per_image=macs,
        peak_gflops=peak,
    )


def test_percent_of_peak_needs_both_macs_and_a_peak() -> None:
    assert case(macs=4_000_000_000, peak=1600.0).percent_of_peak == pytest.approx(200.0)
    assert case(macs=None, peak=1600.0).percent_of_peak is None
    assert case(macs=10, peak=None).percent_of_peak is None
    assert case(rate=None, macs=10, peak=1.0).percent_of_peak is None
    data = codec.to_dict(case(macs=1_000_000_000, peak=1600.0))
    assert data["percent_of_peak"] == pytest.approx(50.0)
    again = codec.from_dict(CaseResult, json.loads(json.dumps(data)))
    assert (again.macs_per_image, again.peak_gflops) == (1_000_000_000, 1600.0)


def test_percent_of_peak_counts_the_backward_pass() -> None:
    # Training and forward+backward do about three forward passes of arithmetic per image
    # (backward: gradients of inputs and of weights); 400 img/s x 1 GMAC x 2 x 3 = 2400 GFLOP/s.
    for mode in ("training", "forward_backward"):
        found = case(macs=1_000_000_000, peak=4800.0, mode=mode).percent_of_peak
        assert found == pytest.approx(50.0), mode
    assert case(macs=1_000_000_000, peak=4800.0).percent_of_peak == pytest.approx(400 * 2 / 48)


def test_table_columns_appear_only_when_given() -> None:
    plain = render_table([case()], width=200)
    assert "$/M img" not in plain[0] and "% of peak" not in plain[0] and "epoch" not in plain[0]
    lines = render_table(
        [case(macs=1_000_000_000, peak=1600.0), case("vgg16")],
        width=200,
        price_per_hour=3.06,
        epoch_images=cost.IMAGENET_TRAIN_IMAGES,
    )
    head = lines[0].split("  ")
    assert [h.strip() for h in head if h.strip()][-5:] == [
        "$/M img",
        "epoch",
        "% of peak",
        "mode",
        "dtype",
    ]
    resnet = next(line for line in lines if line.startswith("resnet50_v1"))
    # 3.06 $/h at 400 img/s: 3.06e6 / (400 * 3600) = $2.125 per million; 1281167 / 400 s.
    assert "$2.12" in resnet and "53 min 23 s $2.72" in resnet and "50.0%" in resnet
    vgg = next(line for line in lines if line.startswith("vgg16"))
    assert vgg.split()[-3] == "-"  # no FLOPs for this case: no share of peak


def test_narrow_table_drops_percent_of_peak_first() -> None:
    results = [case(macs=1_000_000_000, peak=1600.0)]
    wide = render_table(results, width=200, price_per_hour=1.0)
    lines = render_table(results, width=max(map(len, wide)) - 1, price_per_hour=1.0)
    assert "% of peak" not in lines[0] and "$/M img" in lines[0] and "dtype" in lines[0]


def test_case_cost_and_peaks_for_json() -> None:
    data = case_cost(case(), 3.06, 1_000_000)
    assert data is not None
    assert data["dollars_per_million_images"] == pytest.approx(3.06e6 / (400 * 3600))
    assert data["epoch_seconds"] == pytest.approx(2500.0)
    assert data["epoch_dollars"] == pytest.approx(2500.0 / 3600 * 3.06)
    only_epoch = case_cost(case(), None, 1_000_000)
    assert only_epoch is not None and only_epoch["dollars_per_million_images"] is None
    assert case_cost(case(rate=None), 3.06, None) is None
    found = peaks([case(macs=1, peak=90.0), case("vgg16", macs=1, peak=90.0), case("x")])
    assert found == [
        {"hardware": "cpu-x-2c", "device": "cpu(0)", "dtype": "float32", "peak_gflops": 90.0}
    ]


def test_summary_row_maps_a_case() -> None:
    row = summary_row(case())
    assert row.case == "resnet50_v1/inference/float32/bs32/cpu"
    assert row.images_per_sec == pytest.approx(400.0)
    assert row.baseline_images_per_sec == 404.0 and row.change == -0.01
    assert row.verdict == "pass" and row.hardware == "cpu-x-2c"
    assert row.spread is not None and row.spread > 0
    assert summary.to_benchmark_action([row])[0]["value"] == pytest.approx(400.0)


def test_peak_is_probed_once_per_device_and_dtype(tmp_path: Path) -> None:
    backend = FakeBackend()
    session = MxperfSession(Settings(enabled=True), RunInfo.__new__(RunInfo), is_worker=False)
    cpu = backend.context("cpu")
    for _ in range(3):
        assert session.peak_gflops(backend, cpu, ("cpu", 0), "float32") == 100.0
    session.peak_gflops(backend, cpu, ("cpu", 0), "float16")
    assert backend.peak_probes == [(("cpu", 0), "float32"), (("cpu", 0), "float16")]


def test_write_summaries_appends_to_the_step_summary(tmp_path: Path) -> None:
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    md, action = tmp_path / "out" / "s.md", tmp_path / "b.json"
    written, errors = outputs.write_summaries(str(md), str(action), "# table\n", [], str(step))
    assert errors == [] and md.read_text() == "# table\n"
    assert step.read_text() == "earlier step\n# table\n\n"
    assert json.loads(action.read_text()) == [] and len(written) == 3


def test_write_summaries_failure_is_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    written, errors = outputs.write_summaries(str(blocker / "s.md"), None, "x", [], None)
    assert written == [] and "cannot write the Markdown summary" in errors[0]
    assert outputs.check_summaries(None, str(blocker / "b.json")) == (
        f"mxperf: --mxperf-benchmark-action: cannot write {blocker / 'b.json'} "
        f"({blocker} is not a directory)"
    )


def test_small_costs_keep_three_significant_digits() -> None:
    lines = render_table([case(rate=5000.0)], width=200, price_per_hour=0.0832)
    assert "$0.00462" in lines[2]  # 0.0832e6 / (5000 x 3600), not "$0.00"
