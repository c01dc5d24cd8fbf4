"""The SSD study's table in expectations.csv: every published row, in order, with its scaling
kind and device count; the new columns are validated on every row."""

from __future__ import annotations

from pathlib import Path

import expectations
import pytest
from published_rows import PublishedRow, published_rows, row_of

PUBLISHED_MARKDOWN = Path(__file__).resolve().parent / "published-tables.md"
SHARED_COPY_SOURCE = "SSD training (MXNet SSD, PASCAL VOC 2012, 300x300)"

HEADER = "table,hardware,mode,dtype,model,scaling,devices,batch_size,images_per_sec\n"
SSD = "training,float32,ssd_300_vgg16_atrous_voc"
TITAN_1 = f"titanx-ssd-training,gpu-*titan-x*-x1,{SSD},single,1,32,40.2\n"


def ssd_rows() -> list[tuple[dict[str, str], expectations.PublishedFigure]]:
    return [
        (row, figure)
        for (_, row), figure in zip(expectations.read_rows(), expectations.load())
        if expectations.TABLES[figure.table].layout == "rows"
    ]


def test_csv_holds_every_published_ssd_row_in_order() -> None:
    published = published_rows(PUBLISHED_MARKDOWN.read_text(encoding="utf-8"))
    assert len(published) == 11
    assert {row.title for row in published} == {expectations.SSD_TITLE}
    assert [row_of(figure, row["images_per_sec"]) for row, figure in ssd_rows()] == published


def test_ssd_rows_carry_their_scaling_and_devices() -> None:
    kinds = [(f.table.split("-")[0], f.scaling, f.devices, f.batch_size) for _, f in ssd_rows()]
    assert kinds == [
        ("k520", "single", 1, 16),
        ("k520", "weak", 2, 16),
        ("k520", "weak", 5, 16),
        ("gtx1080", "single", 1, 16),
        ("gtx1080", "weak", 2, 16),
        ("gtx1080", "weak", 2, 32),
        ("titanx", "single", 1, 32),
        ("titanx", "strong", 2, 32),
        ("titanx", "strong", 4, 32),
        ("titanx", "single", 1, 16),
        ("titanx", "weak", 2, 16),
    ]
    hardware = {f.hardware for _, f in ssd_rows()}
    assert hardware == {
        "gpu-*k520-x1",
        "gpu-*gtx-1080-x1",
        "gpu-*titan-x*-x1",
        "gpu-*titan-x*-x2",
        "gpu-*titan-x*-x4",
    }


def test_every_row_has_a_known_scaling_and_device_count() -> None:
    for figure in expectations.load():
        assert figure.scaling in expectations.SCALINGS
        assert (figure.scaling == "single") == (figure.devices == 1)
        assert figure.total_batch == figure.batch_per_device * figure.devices


def test_the_interval_cell_stays_an_interval() -> None:
    (k520_5,) = [f for _, f in ssd_rows() if f.table == "k520-ssd-training" and f.devices == 5]
    assert k520_5.images_per_sec is None
    assert k520_5.images_per_sec_range == (9.0, 10.0)
    assert not k520_5.oom


def test_header_names_the_ssd_source() -> None:
    text = expectations.DEFAULT_PATH.read_text(encoding="utf-8")
    comments = " ".join(line for line in text.splitlines() if line.startswith("#"))
    for words in ("2017 field study", "MXNet SSD", "PASCAL VOC 2012", "300x300", "samples/sec"):
        assert words in comments


def test_the_kind_picks_the_one_device_figure() -> None:
    """Weak rows compare with one device at the per-device batch, strong rows with one device
    at the whole batch: the same 2-GPU Titan X run is 99.5% weak and 88.1% strong."""
    single = {
        (f.table, f.batch_size): f.images_per_sec for _, f in ssd_rows() if f.scaling == "single"
    }
    efficiency = {}
    for _, f in ssd_rows():
        reference = single.get(
            (f.table, f.batch_per_device if f.scaling == "weak" else f.total_batch)
        )
        if f.scaling != "single" and f.images_per_sec is not None and reference is not None:
            efficiency[(f.table, f.scaling, f.devices, f.batch_size)] = f.images_per_sec / (
                f.devices * reference
            )
    assert efficiency[("titanx-ssd-training", "weak", 2, 16)] == pytest.approx(0.9952, abs=1e-4)
    assert efficiency[("titanx-ssd-training", "strong", 2, 32)] == pytest.approx(0.8806, abs=1e-4)
    assert efficiency[("titanx-ssd-training", "strong", 4, 32)] == pytest.approx(0.6841, abs=1e-4)
    # The two-1080 collapse: under a fifth of one machine's speed, whether the published
    # figure is one worker's or the sum.
    assert efficiency[("gtx1080-ssd-training", "weak", 2, 16)] < 0.2


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (TITAN_1.replace(",single,", ",linear,"), "scaling must be one of"),
        (TITAN_1.replace(",single,1,", ",single,2,"), "single is exactly one device"),
        (TITAN_1.replace(",single,1,", ",weak,1,"), "single is exactly one device"),
        (TITAN_1.replace(",single,1,", ",single,one,"), "devices must be a positive integer"),
        (TITAN_1.replace(",single,1,", ",single,0,"), "devices must be a positive integer"),
        (
            TITAN_1.replace("-x1,", "-x3,").replace(",single,1,", ",strong,3,"),
            "32 is not a multiple of 3",
        ),
        (TITAN_1.replace(",single,1,", ",strong,2,"), "hardware 'gpu-\\*titan-x\\*-x1'"),
        (
            TITAN_1.replace("titanx", "gtx1080")
            .replace("titan-x*-x1", "gtx-1080-x1")
            .replace(",single,1,", ",strong,2,"),
            "scaling 'strong' does not match table 'gtx1080-ssd-training'",
        ),
        (TITAN_1.replace("40.2", "10-9"), "0 < LOW < HIGH"),
        (TITAN_1.replace("40.2", "9 to 10"), "or an interval LOW-HIGH"),
        (TITAN_1.replace("ssd_300_vgg16_atrous_voc", "resnet50_v1"), "unknown model"),
        (
            "v100-training-fp32,gpu-*v100*-x1,training,float32,resnet50_v1,weak,2,32,600\n",
            "scaling 'weak' does not match table 'v100-training-fp32'",
        ),
    ],
    ids=[
        "unknown-kind",
        "single-on-two",
        "weak-on-one",
        "text-devices",
        "zero-devices",
        "strong-not-divisible",
        "hardware-device-count",
        "strong-across-machines",
        "reversed-interval",
        "text-interval",
        "grid-model-in-ssd",
        "scaling-in-a-single-table",
    ],
)
def test_malformed_scaling_row_is_rejected(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + TITAN_1 + row, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as excinfo:
        expectations.load(path)
    assert str(excinfo.value).startswith(f"{path}:3: ")


def test_same_run_as_weak_and_strong_is_no_duplicate(tmp_path: Path) -> None:
    strong = f"titanx-ssd-training,gpu-*titan-x*-x2,{SSD},strong,2,32,70.8\n"
    weak = f"titanx-ssd-training,gpu-*titan-x*-x2,{SSD},weak,2,16,70.8\n"
    path = tmp_path / "ok.csv"
    path.write_text(HEADER + strong + weak, encoding="utf-8")
    assert [f.total_batch for f in expectations.load(path)] == [32, 32]
    path.write_text(HEADER + strong + strong, encoding="utf-8")
    with pytest.raises(ValueError, match="duplicate of line 2"):
        expectations.load(path)


def test_published_rows_parser() -> None:
    text = (
        "## Grid\n\n| Batch | A |\n|---|---|\n| 1 | 2 |\n\n"
        "## Runs\n\n| Setup | GPU | GPUs | Batch | samples/sec | hours |\n|---|---|---|---|---|---|\n"
        "| box | X | 2 | 32 (16 per GPU) | 9-10 | |\n"
    )
    assert published_rows(text) == [PublishedRow("Runs", "box", "X", 2, "32 (16 per GPU)", "9-10")]
    assert expectations.published_cells(text) == {("Grid", "A", 1): "2"}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("| box | X | two | 32 | 1 |", "GPUs must be a positive integer"),
        ("| box | X | 2 | 32 per GPU | 1 |", "is not 'N' or 'N \\(M per GPU\\)'"),
        ("| box | X | 2 | 32 | fast |", "is no figure"),
        ("| box | X | 2 | 32 |", "expected 5 cells"),
    ],
)
def test_published_rows_parser_rejects_malformed_rows(row: str, message: str) -> None:
    text = (
        f"## Runs\n\n| Setup | GPU | GPUs | Batch | samples/sec |\n|---|---|---|---|---|\n{row}\n"
    )
    with pytest.raises(ValueError, match=message):
        published_rows(text)
