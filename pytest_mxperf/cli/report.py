"""``mxperf report``: the history page (and optionally its Markdown summary) from the stored
baselines and the git history of the repository that holds them."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pytest_mxperf.cli.history_commands import history_page
from pytest_mxperf.config import floors, parsers
from pytest_mxperf.config.options import DEFAULTS
from pytest_mxperf.reporting import history, htmlchart, htmlreport, summary
from pytest_mxperf.run import outputs
from pytest_mxperf.system import files


class ReportCommandError(Exception):
    """A bad floors file or a missing plotly: ``mxperf`` prints it in one line, exit 2."""


DEFAULT_OUT = "mxperf-report.html"


def add_parser(sub: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add the ``report`` subcommand to ``mxperf``'s subparsers (``parents``: the options
    every subcommand also takes after its name, ``--dir`` and ``--hardware``)."""
    report = sub.add_parser(
        "report",
        parents=list(parents),
        help="one self-contained HTML page of images/sec over the commits",
    )
    report.add_argument("--out", default=DEFAULT_OUT, help=f"page to write (default {DEFAULT_OUT})")
    report.add_argument(
        "--expectations",
        type=Path,
        help="CSV or JSON of expectation floors (hardware glob, model, mode, dtype, batch_size, "
        "images_per_sec), drawn as lines",
    )
    report.add_argument(
        "--tolerance",
        type=fraction,
        default=DEFAULTS["unconfirmed_tolerance"],
        help="smallest change marked as a regression or improvement, when larger than twice "
        f"the stored noise (default {DEFAULTS['unconfirmed_tolerance']:.2f})",
    )
    report.add_argument("--markdown", type=Path, help="also write the summary table as Markdown")
    report.add_argument(
        "--history",
        metavar="STORE",
        help="also plot the index of paired ratios from this history store (a directory, or "
        "git:BRANCH of the repository here, e.g. git:mxperf-history)",
    )
    report.add_argument(
        "--history-no-fetch",
        action="store_true",
        help="read the --history branch as last fetched, without asking the remote (a job "
        "step that has no credentials)",
    )
    add_cost_arguments(report)


def fraction(text: str) -> float:
    """A tolerance: a fraction in [0, 1) (-1, nan or 1.5 would mark nothing or everything)."""
    try:
        return parsers.fraction(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a fraction in [0, 1), e.g. 0.15 for 15%, got {text!r}"
        ) from None


def positive_float(text: str) -> float:
    """A price per hour, bounded as the plugin's ``--mxperf-price-per-hour``."""
    try:
        return parsers.price_per_hour(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{_why(exc)}, got {text!r}") from None


def positive_int(text: str) -> int:
    """Images in an epoch, bounded as the plugin's ``--mxperf-epoch-images``."""
    try:
        return parsers.epoch_images(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{_why(exc)}, got {text!r}") from None


def _why(exc: ValueError) -> str:
    # int("x")/float("x") say "invalid literal ...": name what was expected instead.
    text = str(exc)
    return text if text.startswith("must") else "must be a number"


def add_cost_arguments(parser: Any, epoch: bool = True) -> None:
    """``--price-per-hour`` (and ``--epoch-images``), as the plugin's cost options."""
    parser.add_argument(
        "--price-per-hour",
        type=positive_float,
        metavar="USD",
        help="price of the machine per hour: show dollars per million images",
    )
    if epoch:
        parser.add_argument(
            "--epoch-images",
            type=positive_int,
            metavar="N",
            help="images in one epoch (e.g. 1281167 for ImageNet-1k): show time per epoch",
        )


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse an output that cannot be written before anything is built."""
    for option, path in (("--out", Path(args.out)), ("--markdown", args.markdown)):
        if path is not None:
            why = outputs.unwritable(path, directory=False)
            if why:
                raise ReportCommandError(f"{option}: cannot write {path} ({why})")


@contextlib.contextmanager
def _writing(option: str, path: Path) -> Iterator[None]:
    """A file that still cannot be written (/proc, a full disk) is one line, exit 2."""
    try:
        yield
    except OSError as exc:
        raise ReportCommandError(f"{option}: cannot write {path}: {exc.strerror or exc}") from None


def run(root: Path, args: argparse.Namespace) -> int:
    """Build the page; print where it went and what it holds."""
    _check_outputs(args)
    out = Path(args.out)
    try:
        found = floors.load(args.expectations) if args.expectations else []
        hist = history.load_history(root, tolerance=args.tolerance, floors=found)
        if args.hardware:
            kept = tuple(h for h in hist.hardware if h.hardware == args.hardware)
            if not kept:
                stored = ", ".join(h.hardware for h in hist.hardware) or "none"
                raise ReportCommandError(
                    f"no baselines for hardware {args.hardware!r} (stored: {stored})"
                )
            hist = dataclasses.replace(hist, hardware=kept)
        index = history_page(args.history, fetch=not args.history_no_fetch) if args.history else ""
        with _writing("--out", out):
            htmlreport.write_report(
                hist,
                out,
                price_per_hour=args.price_per_hour,
                epoch_images=args.epoch_images,
                index_html=index,
            )
    except (floors.FloorError, htmlchart.ReportError) as exc:
        raise ReportCommandError(str(exc)) from None
    rows = history.summary_rows(hist)
    if args.markdown:
        with _writing("--markdown", args.markdown):
            files.write_text_atomic(Path(args.markdown), summary.to_markdown(rows))
    commits = sum(len(h.commits) for h in hist.hardware)
    keys = len(hist.hardware)
    print(f"{out}: {len(rows)} cases, {commits} stored commit(s), {keys} hardware key(s)")
    for note in (*hist.notes, *hist.errors):
        print(f"note: {note}")
    return 0
