"""``mxperf merge REPORT.json... [--out merged.json] [--markdown FILE] [--expect-shards N]``:
shard reports as one report and one summary (`pytest_mxperf.history.shards`); exit 1 when a shard
is missing, unreadable or failed, or the shards do not agree."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_mxperf.history import shards
from pytest_mxperf.system import files


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("merge", help="shard reports as one report and one summary table")
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    parser.add_argument("--out", type=Path, help="write the merged JSON report here")
    parser.add_argument("--markdown", type=Path, help="write the summary as Markdown here")
    parser.add_argument(
        "--expect-shards", type=int, metavar="N", help="the matrix's shard count: fewer is an error"
    )


def run(root: Path, args: argparse.Namespace) -> int:
    del root
    merged = shards.merge(args.reports, args.expect_shards)
    print(shards.summary(merged), end="")
    if args.out:
        files.write_json_atomic(args.out, merged.report)
    if args.markdown:
        files.write_text_atomic(args.markdown, shards.summary(merged, fmt="github"))
    return 0 if merged.ok else 1
