"""The published-figures CSV loads, matches the published markdown tables, and rejects bad rows."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest
from published_rows import published_rows

#: A copy of MXNet's published benchmark tables (as written in MXNet's performance docs), kept
#: in the repository so the check runs in every clone.
PUBLISHED_MARKDOWN = Path(__file__).resolve().parent / "published-tables.md"

HEADER = "table,hardware,mode,dtype,model,scaling,devices,batch_size,images_per_sec\n"
GOOD_ROW = "v100-inference-fp32,gpu-*v100*-x1,inference,float32,resnet50_v1,single,1,32,1076.81\n"


def _load_module() -> ModuleType:
    import expectations  # tests/perf is on sys.path for the tests in it

    return expectations


expectations = _load_module()


@pytest.fixture(scope="module")
def published_markdown() -> str:
    return PUBLISHED_MARKDOWN.read_text(encoding="utf-8")


def test_every_row_loads() -> None:
    figures = expectations.load()
    assert len(figures) == len(expectations.read_rows())
    assert {f.table for f in figures} == set(expectations.TABLES)
    assert {f.model for f in figures} == {*expectations.MODEL_COLUMNS, *expectations.SSD_MODELS}
    for figure in figures:
        assert isinstance(figure.batch_size, int)
        assert figure.images_per_sec is None or figure.images_per_sec > 0


def test_oom_cells_load_as_none() -> None:
    oom = {(f.table, f.model, f.batch_size) for f in expectations.load() if f.oom}
    assert oom == {
        ("k80-inference-fp32", "vgg16", 128),
        ("k80-inference-fp32", "vgg16", 256),
        ("m60-inference-fp32", "vgg16", 128),
        ("m60-inference-fp32", "vgg16", 256),
        ("v100-training-fp32", "alexnet", 128),
    }


def test_header_names_the_source() -> None:
    text = expectations.DEFAULT_PATH.read_text(encoding="utf-8")
    comments = " ".join(line for line in text.splitlines() if line.startswith("#"))
    assert "Apache MXNet performance documentation" in comments
    assert "MXNet 1.2.0.rc1" in comments
    assert "benchmark_score.py" in comments
    assert "train_imagenet.py --benchmark 1" in comments
    assert "16x" in comments


def test_csv_matches_published_markdown_both_ways(published_markdown: str) -> None:
    cells = expectations.published_cells(published_markdown)
    values = expectations.parse_published_markdown(published_markdown)
    assert cells, "no tables found in the published markdown"

    csv_keys: set[tuple[str, str, int]] = set()
    for (lineno, row), figure in zip(expectations.read_rows(), expectations.load()):
        if expectations.TABLES[figure.table].layout != "grid":
            continue  # the SSD study's row table: test_expectations_ssd.py
        key = figure.markdown_key
        assert key not in csv_keys, f"line {lineno}: two rows for {key}"
        csv_keys.add(key)
        assert key in cells, f"line {lineno}: {key} is not a published cell"
        # Same text, so the same decimals ("46.80", not "46.8").
        assert row["images_per_sec"] == cells[key], f"line {lineno}"
        expected = values[key]
        if expected == expectations.OOM:
            assert figure.images_per_sec is None, f"line {lineno}"
        else:
            assert figure.images_per_sec == expected, f"line {lineno}"

    missing = sorted(set(cells) - csv_keys)
    assert not missing, f"published cells missing from the CSV: {missing}"


def test_every_table_id_names_a_published_section(published_markdown: str) -> None:
    titles = {title for title, _, _ in expectations.published_cells(published_markdown)}
    titles |= {row.title for row in published_rows(published_markdown)}
    assert {table.title for table in expectations.TABLES.values()} == titles


def test_parse_published_markdown() -> None:
    text = (
        "# Title\n\nSome prose | with a pipe? no.\n\n"
        "## GPU inference, X\n\n"
        "| Batch | Alexnet | VGG 16 |\n"
        "|---|---|---|\n"
        "| 1 | 10.50 | OOM |\n"
        "| 2 | 20 | 3.25 |\n\n"
        "Prose after.\n\n"
        "## GPU training, X\n\n"
        "| Batch | Alexnet(*16) |\n"
        "|---|---|\n"
        "| 1 | 7.00 |\n"
    )
    assert expectations.parse_published_markdown(text) == {
        ("GPU inference, X", "Alexnet", 1): 10.5,
        ("GPU inference, X", "VGG 16", 1): "OOM",
        ("GPU inference, X", "Alexnet", 2): 20.0,
        ("GPU inference, X", "VGG 16", 2): 3.25,
        ("GPU training, X", "Alexnet(*16)", 1): 7.0,
    }
    assert expectations.published_cells(text)[("GPU training, X", "Alexnet(*16)", 1)] == "7.00"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("## T\n\n| Batch | A |\n|---|---|\n| 1 | 2 | 3 |\n", "expected 2 cells"),
        ("## T\n\n| Batch | A |\n|---|---|\n| 1 | fast |\n", "not a number"),
        ("## T\n\n| Batch | A |\n|---|---|\n| x | 2 |\n", "batch must be an integer"),
        ("| Batch | A |\n|---|---|\n| 1 | 2 |\n", "must start with"),
        ("## T\n\n| Batch | A |\n| 1 | 2 |\n\n## T\n\n| Batch | A |\n| 1 | 2 |\n", "twice"),
    ],
    ids=["extra-cell", "text-cell", "text-batch", "no-title", "duplicate-title"],
)
def test_parse_published_markdown_rejects_malformed_tables(table: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expectations.parse_published_markdown(table)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (GOOD_ROW.replace(",32,", ",thirty-two,"), "batch_size must be a positive integer"),
        (GOOD_ROW.replace(",32,", ",0,"), "batch_size must be a positive integer"),
        (GOOD_ROW.replace("1076.81", "fast"), "images_per_sec must be a number or 'OOM'"),
        (GOOD_ROW.replace("1076.81", "-3"), "positive and finite"),
        (GOOD_ROW.replace("1076.81", "nan"), "positive and finite"),
        (GOOD_ROW.replace(",1076.81", ""), "expected 9 fields, got 8"),
        (GOOD_ROW.replace("resnet50_v1", "resnet-50"), "unknown model 'resnet-50'"),
        (GOOD_ROW.replace("v100-inference-fp32", "v100-scoring"), "unknown table"),
        (GOOD_ROW.replace(",inference,", ",training,"), "mode 'training' does not match"),
        (GOOD_ROW.replace("float32", "float16"), "dtype 'float16' does not match"),
        (GOOD_ROW.replace("gpu-*v100*-x1", "gpu-*V100*-x1"), "hardware"),
        (GOOD_ROW.replace("resnet50_v1", ""), "model is empty"),
    ],
    ids=[
        "text-batch",
        "zero-batch",
        "text-figure",
        "negative-figure",
        "nan-figure",
        "missing-field",
        "unknown-model",
        "unknown-table",
        "mode-mismatch",
        "dtype-mismatch",
        "hardware-mismatch",
        "empty-model",
    ],
)
def test_malformed_row_is_rejected_with_file_and_line(
    tmp_path: Path, row: str, message: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("# a comment\n" + HEADER + GOOD_ROW + "\n" + row, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as excinfo:
        expectations.load(path)
    # Line 5: comment, header, good row, blank line, then the bad row.
    assert str(excinfo.value).startswith(f"{path}:5: ")


def test_duplicate_row_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text(HEADER + GOOD_ROW + GOOD_ROW, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:3: duplicate of line 2"):
        expectations.load(path)


def test_wrong_header_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("# c\n" + HEADER.replace("images_per_sec", "ips") + GOOD_ROW, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:2: header must be"):
        expectations.load(path)


def test_good_row_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.csv"
    path.write_text(HEADER + GOOD_ROW, encoding="utf-8")
    assert expectations.load(path) == [
        expectations.PublishedFigure(
            table="v100-inference-fp32",
            hardware="gpu-*v100*-x1",
            mode="inference",
            dtype="float32",
            model="resnet50_v1",
            batch_size=32,
            images_per_sec=1076.81,
        )
    ]
