"""The row tables of ``published-tables.md`` (the SSD study's: one row per run), read as written,
and the row a CSV figure of such a table stands for (stdlib only).

A row table is a ``## <title>`` line followed by a ``| Setup | GPU | GPUs | Batch |
samples/sec | ...`` header. Its rows are compared with the CSV's in order, not by key: the SSD
table lists one run twice (the 2-GPU Titan X row at 32, 16 per GPU), once in its strong-scaling
series and once beside the 1-GPU figure at 16, and the CSV keeps both (strong and weak).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from expectations import ROW_TABLE, TABLES, PublishedFigure

#: The columns a row table must have (it may have more: hours, epochs/hour).
ROW_COLUMNS = (ROW_TABLE, "GPU", "GPUs", "Batch", "samples/sec")

# "32" or "32 (16 per GPU)"; a figure "70.8" or an interval "9-10".
_BATCH = re.compile(r"\d+( \(\d+ per GPU\))?")
_FIGURE = re.compile(r"\d+(\.\d+)?(-\d+(\.\d+)?)?")


@dataclass(frozen=True)
class PublishedRow:
    """One row of a row table, its cells as written."""

    title: str
    setup: str
    gpu: str
    gpus: int
    batch: str
    samples_per_sec: str


def published_rows(text: str) -> list[PublishedRow]:
    """Every row of the row tables in ``text``, in order (grid tables are skipped)."""
    rows: list[PublishedRow] = []
    title: str | None = None
    header: list[str] | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("## "):
            title, header = stripped[3:].strip(), None
            continue
        if not stripped.startswith("|"):
            if header is not None and stripped:
                header = None
            continue
        fields = [field.strip() for field in stripped.strip("|").split("|")]
        if header is None:
            header = fields
            missing = [c for c in ROW_COLUMNS if c not in header]
            if fields[0] == ROW_TABLE and missing:
                raise ValueError(f"line {lineno}: a row table needs column(s) {missing}")
            continue
        if header[0] != ROW_TABLE or all(re.fullmatch(r":?-+:?", f) for f in fields):
            continue
        if len(fields) != len(header):
            raise ValueError(f"line {lineno}: expected {len(header)} cells, got {len(fields)}")
        cell = dict(zip(header, fields))
        if not cell["GPUs"].isdigit() or int(cell["GPUs"]) < 1:
            raise ValueError(f"line {lineno}: GPUs must be a positive integer: {cell['GPUs']!r}")
        if not _BATCH.fullmatch(cell["Batch"]):
            raise ValueError(
                f"line {lineno}: Batch {cell['Batch']!r} is not 'N' or 'N (M per GPU)'"
            )
        if not _FIGURE.fullmatch(cell["samples/sec"]):
            raise ValueError(f"line {lineno}: samples/sec {cell['samples/sec']!r} is no figure")
        assert title is not None
        rows.append(
            PublishedRow(
                title,
                cell[ROW_TABLE],
                cell["GPU"],
                int(cell["GPUs"]),
                cell["Batch"],
                cell["samples/sec"],
            )
        )
    return rows


def row_of(figure: PublishedFigure, images_per_sec: str) -> PublishedRow:
    """The published row a CSV figure of a row table stands for (``images_per_sec``: the CSV
    cell as written).

    The Batch cell as the study writes it: on one machine the total batch, with ``(N per GPU)``
    when several GPUs split it; with one machine per GPU, the batch each machine takes.
    """
    table = TABLES[figure.table]
    if table.setup is None or table.gpu is None:
        raise ValueError(f"table {figure.table!r} is a grid table, not a row table")
    if table.one_machine:
        batch = str(figure.total_batch)
        if figure.devices > 1:
            batch += f" ({figure.batch_per_device} per GPU)"
    else:
        batch = str(figure.batch_per_device)
    return PublishedRow(table.title, table.setup, table.gpu, figure.devices, batch, images_per_sec)
