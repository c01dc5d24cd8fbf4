"""Published MXNet throughput figures, as a validated table (stdlib only).

``expectations.csv`` beside this file holds the images/sec that the Apache MXNet performance
documentation (faq/perf.md) published for MXNet 1.2.0.rc1, and the samples/sec of a 2017 field
study's MXNet SSD training table (one machine and several, weak and strong scaling). This module
loads it into :class:`PublishedFigure` records, checking every row, and parses the markdown form
of the grid tables (``published-tables.md`` beside this file, copied from MXNet's docs) so a test
can check that the two agree cell for cell (the SSD table's rows: ``published_rows``).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from published_tables import MODEL_COLUMNS as MODEL_COLUMNS
from published_tables import SCALINGS as SCALINGS
from published_tables import SSD_MODELS as SSD_MODELS
from published_tables import SSD_TITLE as SSD_TITLE
from published_tables import TABLES as TABLES
from published_tables import TRAINING_MODEL_COLUMNS as TRAINING_MODEL_COLUMNS
from published_tables import PublishedTable as PublishedTable

DEFAULT_PATH = Path(__file__).with_name("expectations.csv")

COLUMNS = (
    "table",
    "hardware",
    "mode",
    "dtype",
    "model",
    "scaling",
    "devices",
    "batch_size",
    "images_per_sec",
)

OOM = "OOM"
"""How a batch that did not fit in GPU memory is written, in the CSV and in the markdown."""

MODES = ("inference", "training")
DTYPES = ("float32", "float16")

# A published interval, as written ("9-10"): low and high, both positive, low < high.
_INTERVAL = re.compile(r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)")

# A glob on the plugin's hardware key: lower-case slug characters plus glob wildcards.
_HARDWARE_PATTERN = re.compile(r"[a-z0-9.\-*?]+")


#: The first header of a row table (one row per run) in the published markdown.
ROW_TABLE = "Setup"

MarkdownKey = tuple[str, str, int]
"""(section title, column header, batch size) of one cell in the published markdown."""


@dataclass(frozen=True)
class PublishedFigure:
    """One published throughput: images/sec, or None where the batch ran out of memory or the
    source gives an interval (then ``images_per_sec_range`` holds it)."""

    table: str
    hardware: str
    mode: str
    dtype: str
    model: str
    batch_size: int
    images_per_sec: float | None
    scaling: str = "single"
    devices: int = 1
    images_per_sec_range: tuple[float, float] | None = None

    @property
    def oom(self) -> bool:
        return self.images_per_sec is None and self.images_per_sec_range is None

    @property
    def total_batch(self) -> int:
        """Images of one step over all devices."""
        return self.batch_size * self.devices if self.scaling == "weak" else self.batch_size

    @property
    def batch_per_device(self) -> int:
        return self.total_batch // self.devices

    @property
    def markdown_key(self) -> MarkdownKey:
        """Where this figure sits in the published markdown tables."""
        return markdown_key(self.table, self.mode, self.model, self.batch_size)


def markdown_key(table: str, mode: str, model: str, batch_size: int) -> MarkdownKey:
    """The (section title, column header, batch) that a CSV row's figure comes from (grid
    tables only: a row table's rows are compared in order, see ``published_rows``)."""
    if TABLES[table].layout != "grid":
        raise ValueError(f"table {table!r} is a row table, not a grid")
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
    scaling, devices = expected.check_scaling(row["scaling"], row["devices"], table)
    wanted = {
        "hardware": expected.hardware_for(devices),
        "mode": expected.mode,
        "dtype": expected.dtype,
    }
    for column, value in wanted.items():
        if row[column] != value:
            raise ValueError(
                f"{column} {row[column]!r} does not match table {table!r}, which has {value!r}"
            )
    # Also checked directly, so a wrong entry in TABLES cannot slip through.
    if not _HARDWARE_PATTERN.fullmatch(row["hardware"]):
        raise ValueError(f"hardware {row['hardware']!r} is not a lower-case slug pattern")
    if row["mode"] not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {row['mode']!r}")
    if row["dtype"] not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {row['dtype']!r}")

    model = row["model"]
    models = tuple(MODEL_COLUMNS) if expected.models is None else expected.models
    if model not in models:
        raise ValueError(f"unknown model {model!r} (known in {table}: {', '.join(models)})")

    text = row["batch_size"]
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"batch_size must be a positive integer, got {text!r}")
    batch_size = int(text)
    if scaling == "strong" and batch_size % devices:
        raise ValueError(
            f"strong scaling splits batch_size {batch_size} over {devices} devices: "
            f"{batch_size} is not a multiple of {devices}"
        )

    text = row["images_per_sec"]
    images_per_sec: float | None = None
    interval = _INTERVAL.fullmatch(text)
    span: tuple[float, float] | None = None
    if interval:
        span = (float(interval.group(1)), float(interval.group(2)))
        if not 0 < span[0] < span[1]:
            raise ValueError(f"images_per_sec interval must be 0 < LOW < HIGH, got {text!r}")
    elif text != OOM:
        try:
            images_per_sec = float(text)
        except ValueError:
            raise ValueError(
                f"images_per_sec must be a number or {OOM!r} (or an interval LOW-HIGH), "
                f"got {text!r}"
            ) from None
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
        scaling=scaling,
        devices=devices,
        images_per_sec_range=span,
    )


def load(path: Path | str = DEFAULT_PATH) -> list[PublishedFigure]:
    """Load and validate every row of the expectations CSV.

    Raises ValueError naming the file and line of the first bad row: a missing or extra field,
    an unknown table or model, hardware/mode/dtype/scaling that disagree with the table id, a
    scaling that is not single/weak/strong or disagrees with the devices (single is one device,
    weak and strong more), a batch size that is not a positive integer (or, for strong scaling,
    not a multiple of the devices), a figure that is neither a positive number, an interval
    ``LOW-HIGH`` nor ``OOM``, or the same (table, model, scaling, devices, batch size) twice.
    """
    figures: list[PublishedFigure] = []
    seen: dict[tuple[str, str, str, int, int], int] = {}
    for lineno, row in read_rows(path):
        try:
            figure = _parse_row(row)
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
        key = (figure.table, figure.model, figure.scaling, figure.devices, figure.batch_size)
        if key in seen:
            raise ValueError(
                f"{path}:{lineno}: duplicate of line {seen[key]} (table {key[0]}, model "
                f"{key[1]}, {key[2]} over {key[3]} devices, batch size {key[4]})"
            )
        seen[key] = lineno
        figures.append(figure)
    return figures


def published_cells(text: str) -> dict[MarkdownKey, str]:
    """Every cell of markdown tables in the ``published-tables.md`` layout, as written.

    A table is a ``## <title>`` line followed by a ``| Batch | <model> | ...`` header, a
    ``|---|`` separator and one row per batch size. Prose between sections is ignored. Cells
    are kept as text ("46.80" stays "46.80"); each must be a number or ``OOM``. A row table
    (header ``| Setup | ...``, the SSD study's) is skipped: ``published_rows`` reads it.
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
            if title is None or fields[0] not in ("Batch", ROW_TABLE):
                raise ValueError(
                    f"line {lineno}: a table must start with '| Batch |' or "
                    f"'| {ROW_TABLE} |' under '## '"
                )
            header = fields
            continue
        if header[0] == ROW_TABLE:
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
