"""Published MXNet 1.2.0 throughput figures, as a validated table (stdlib only).

``expectations.csv`` beside this file holds the images/sec that the Apache MXNet performance
documentation (faq/perf.md) published for MXNet 1.2.0.rc1. This module loads it into
:class:`PublishedFigure` records, checking every row, and parses the markdown form of the same
tables (``published-tables.md`` beside this file, copied from MXNet's docs) so a test can check that the two agree cell for cell.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PATH = Path(__file__).with_name("expectations.csv")

COLUMNS = ("table", "hardware", "mode", "dtype", "model", "batch_size", "images_per_sec")

OOM = "OOM"
"""How a batch that did not fit in GPU memory is written, in the CSV and in the markdown."""

MODES = ("inference", "training")
DTYPES = ("float32", "float16")

# A glob on the plugin's hardware key: lower-case slug characters plus glob wildcards.
_HARDWARE_PATTERN = re.compile(r"[a-z0-9.\-*?]+")


@dataclass(frozen=True)
class PublishedTable:
    """One source table: its markdown section title and what every row in it shares."""

    title: str
    hardware: str
    mode: str
    dtype: str


TABLES: dict[str, PublishedTable] = {
    "c5.18xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.18xlarge", "cpu-*8124m*-72c", "inference", "float32"
    ),
    "c5.9xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.9xlarge", "cpu-*8124m*-36c", "inference", "float32"
    ),
    "c5.4xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.4xlarge", "cpu-*8124m*-16c", "inference", "float32"
    ),
    "c5.2xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.2xlarge", "cpu-*8124m*-8c", "inference", "float32"
    ),
    "c5.xlarge-inference-fp32": PublishedTable(
        "CPU inference, AWS EC2 C5.xlarge", "cpu-*8124m*-4c", "inference", "float32"
    ),
    "k80-inference-fp32": PublishedTable(
        "GPU inference, K80 (EC2 p2.2xlarge), float32", "gpu-*k80*-x1", "inference", "float32"
    ),
    "m60-inference-fp32": PublishedTable(
        "GPU inference, M60 (EC2 g3.4xlarge), float32", "gpu-*m60*-x1", "inference", "float32"
    ),
    "v100-inference-fp32": PublishedTable(
        "GPU inference, V100 (EC2 p3.2xlarge), float32", "gpu-*v100*-x1", "inference", "float32"
    ),
    "v100-inference-fp16": PublishedTable(
        "GPU inference, V100 (EC2 p3.2xlarge), float16", "gpu-*v100*-x1", "inference", "float16"
    ),
    "k80-training-fp32": PublishedTable(
        "GPU training, K80 (single GPU), float32", "gpu-*k80*-x1", "training", "float32"
    ),
    "m60-training-fp32": PublishedTable(
        "GPU training, M60, float32", "gpu-*m60*-x1", "training", "float32"
    ),
    "v100-training-fp32": PublishedTable(
        "GPU training, V100, float32", "gpu-*v100*-x1", "training", "float32"
    ),
}
"""Table ids used in the CSV, with the markdown section each one comes from."""

MODEL_COLUMNS: dict[str, str] = {
    "alexnet": "Alexnet",
    "vgg16": "VGG 16",
    "inception-bn": "Inception-BN",
    "inceptionv3": "Inception-v3",
    "resnet50_v1": "Resnet 50",
    "resnet152_v1": "Resnet 152",
}
"""Model ids used in the CSV, with the column header the published tables give them."""

# The training tables mark AlexNet's column: its real batch is 16 times the one shown.
TRAINING_MODEL_COLUMNS: dict[str, str] = {**MODEL_COLUMNS, "alexnet": "Alexnet(*16)"}

MarkdownKey = tuple[str, str, int]
"""(section title, column header, batch size) of one cell in the published markdown."""


@dataclass(frozen=True)
class PublishedFigure:
    """One published throughput: images/sec, or None where the batch ran out of memory."""

    table: str
    hardware: str
    mode: str
    dtype: str
    model: str
    batch_size: int
    images_per_sec: float | None

    @property
    def markdown_key(self) -> MarkdownKey:
        """Where this figure sits in the published markdown tables."""
        return markdown_key(self.table, self.mode, self.model, self.batch_size)


def markdown_key(table: str, mode: str, model: str, batch_size: int) -> MarkdownKey:
    """The (section title, column header, batch) that a CSV row's figure comes from."""
    columns = TRAINING_MODEL_COLUMNS if mode == "training" else MODEL_COLUMNS
    return (TABLES[table].title, columns[model], batch_size)


def read_rows(path: Path | str = DEFAULT_PATH) -> list[tuple[int, dict[str, str]]]:
    """The data rows of the CSV as text, each with its line number.

    Lines starting with ``#`` and blank lines are skipped; the first other line must be the
    header naming exactly :data:`COLUMNS`.
    """
    path = Path(path)
    rows: list[tuple[int, dict[str, str]]] = []
    header: list[str] | None = None
    with path.open(encoding="utf-8", newline="") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = [field.strip() for field in next(csv.reader([line]))]
            if header is None:
                if tuple(fields) != COLUMNS:
                    raise ValueError(
                        f"{path}:{lineno}: header must be {','.join(COLUMNS)!r}, "
                        f"got {','.join(fields)!r}"
                    )
                header = fields
                continue
            if len(fields) != len(header):
                raise ValueError(
                    f"{path}:{lineno}: expected {len(header)} fields, got {len(fields)}"
                )
            rows.append((lineno, dict(zip(header, fields))))
    if header is None:
        raise ValueError(f"{path}: no header line")
    return rows


def _parse_row(row: dict[str, str]) -> PublishedFigure:
    """Check one row; the ValueError raised says what is wrong, without the location."""
    for column in COLUMNS:
        if not row[column]:
            raise ValueError(f"{column} is empty")

    table = row["table"]
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r} (known: {', '.join(TABLES)})")
    expected = TABLES[table]
    for column in ("hardware", "mode", "dtype"):
        if row[column] != getattr(expected, column):
            raise ValueError(
                f"{column} {row[column]!r} does not match table {table!r}, "
                f"which has {getattr(expected, column)!r}"
            )
    # Also checked directly, so a wrong entry in TABLES cannot slip through.
    if not _HARDWARE_PATTERN.fullmatch(row["hardware"]):
        raise ValueError(f"hardware {row['hardware']!r} is not a lower-case slug pattern")
    if row["mode"] not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {row['mode']!r}")
    if row["dtype"] not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {row['dtype']!r}")

    model = row["model"]
    if model not in MODEL_COLUMNS:
        raise ValueError(f"unknown model {model!r} (known: {', '.join(MODEL_COLUMNS)})")

    text = row["batch_size"]
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"batch_size must be a positive integer, got {text!r}")
    batch_size = int(text)

    text = row["images_per_sec"]
    images_per_sec: float | None
    if text == OOM:
        images_per_sec = None
    else:
        try:
            images_per_sec = float(text)
        except ValueError:
            raise ValueError(f"images_per_sec must be a number or {OOM!r}, got {text!r}") from None
        if not math.isfinite(images_per_sec) or images_per_sec <= 0:
            raise ValueError(f"images_per_sec must be positive and finite, got {text!r}")

    return PublishedFigure(
        table=table,
        hardware=row["hardware"],
        mode=row["mode"],
        dtype=row["dtype"],
        model=model,
        batch_size=batch_size,
        images_per_sec=images_per_sec,
    )


def load(path: Path | str = DEFAULT_PATH) -> list[PublishedFigure]:
    """Load and validate every row of the expectations CSV.

    Raises ValueError naming the file and line of the first bad row: a missing or extra field,
    an unknown table or model, hardware/mode/dtype that disagree with the table id, a batch size
    that is not a positive integer, a figure that is neither a positive number nor ``OOM``, or
    the same (table, model, batch size) twice.
    """
    figures: list[PublishedFigure] = []
    seen: dict[tuple[str, str, int], int] = {}
    for lineno, row in read_rows(path):
        try:
            figure = _parse_row(row)
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
        key = (figure.table, figure.model, figure.batch_size)
        if key in seen:
            raise ValueError(
                f"{path}:{lineno}: duplicate of line {seen[key]} "
                f"(table {key[0]}, model {key[1]}, batch size {key[2]})"
            )
        seen[key] = lineno
        figures.append(figure)
    return figures


def published_cells(text: str) -> dict[MarkdownKey, str]:
    """Every cell of markdown tables in the ``published-tables.md`` layout, as written.

    A table is a ``## <title>`` line followed by a ``| Batch | <model> | ...`` header, a
    ``|---|`` separator and one row per batch size. Prose between sections is ignored. Cells
    are kept as text ("46.80" stays "46.80"); each must be a number or ``OOM``.
    """
    cells: dict[MarkdownKey, str] = {}
    title: str | None = None
    header: list[str] | None = None
    titles: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("## "):
            title = stripped[3:].strip()
            if title in titles:
                raise ValueError(f"line {lineno}: section {title!r} appears twice")
            titles.add(title)
            header = None
            continue
        if not stripped.startswith("|"):
            if header is not None and stripped:
                header = None  # prose after a table ends it
            continue
        fields = [field.strip() for field in stripped.strip("|").split("|")]
        if header is None:
            if title is None or fields[0] != "Batch":
                raise ValueError(f"line {lineno}: a table must start with '| Batch |' under '## '")
            header = fields
            continue
        if all(re.fullmatch(r":?-+:?", field) for field in fields):
            continue
        if len(fields) != len(header):
            raise ValueError(f"line {lineno}: expected {len(header)} cells, got {len(fields)}")
        if not fields[0].isdigit():
            raise ValueError(f"line {lineno}: batch must be an integer, got {fields[0]!r}")
        assert title is not None
        batch = int(fields[0])
        for column, cell in zip(header[1:], fields[1:]):
            if cell != OOM and not re.fullmatch(r"\d+(\.\d+)?", cell):
                raise ValueError(f"line {lineno}: {column}: {cell!r} is not a number or {OOM}")
            key = (title, column, batch)
            if key in cells:
                raise ValueError(f"line {lineno}: batch {batch} appears twice in {title!r}")
            cells[key] = cell
    return cells


def parse_published_markdown(text: str) -> dict[MarkdownKey, float | str]:
    """The published markdown tables as {(section title, column header, batch): value}.

    Each value is a float, or the string ``"OOM"`` where the batch did not fit in memory.
    :func:`published_cells` gives the same cells as written.
    """
    return {
        key: cell if cell == OOM else float(cell) for key, cell in published_cells(text).items()
    }
