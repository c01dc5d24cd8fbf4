"""``mxperf``: look at stored baselines without running pytest.

::

    mxperf list                       hardware keys and the commits stored for each
    mxperf show [REV]                 one baseline as a table (default: the newest)
    mxperf compare OLD NEW            what changed from OLD to NEW; exit 1 if NEW regressed
    mxperf report [--out FILE]        one HTML page of images/sec over the commits
    mxperf history add|base|anchor|show   paired ratios over the commits (``cli.history_commands``)
    mxperf bisect GOOD BAD [-k EXPR]  the first commit whose paired run against GOOD moved
    mxperf merge REPORT.json...       shard reports as one; exit 1 if a shard is missing/failed
    mxperf comment render|post        the pull-request comment of a run (`cli.comment`)
    mxperf --version                  the installed pytest-mxperf version

Exit status: 0 fine, 1 a regression in ``compare`` (in ``bisect``: skipped steps leave several
commits; in ``merge``: a shard missing, unreadable or failed), 2 bad input (unknown revision,
unreadable file, ambiguous hardware).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from pytest_mxperf import __version__
from pytest_mxperf.baselines import store as baselines
from pytest_mxperf.cli import bisect as bisect_command
from pytest_mxperf.cli import comment as comment_command
from pytest_mxperf.cli import history_commands
from pytest_mxperf.cli import merge as merge_command
from pytest_mxperf.cli import report as report_command
from pytest_mxperf.judging.decisions import Policy, compare_rates, stored_noise
from pytest_mxperf.measuring.records import Outcome
from pytest_mxperf.reporting import cost
from pytest_mxperf.system import gitinfo


class CliError(Exception):
    pass


@dataclass
class _Stored:
    """The baseline files of one hardware key: those that load, and errors for the others."""

    files: list[baselines.BaselineFile]
    bad: dict[str, str]  # sha (from the file name) -> why it cannot be read

    def warn(self, skip: str | None = None) -> None:
        """Name every unreadable file (but ``skip``) on stderr: reported, then passed over."""
        for sha, why in sorted(self.bad.items()):
            if sha != skip:
                print(f"mxperf: warning: skipped: {why}", file=sys.stderr)


def _files(root: Path, hardware: str) -> _Stored:
    found, bad = [], {}
    for sha, path in baselines.commit_files(root, hardware).items():
        try:
            found.append(baselines.load(path))
        except baselines.BaselineError as exc:
            bad[sha] = str(exc)
    return _Stored(sorted(found, key=lambda f: f.date, reverse=True), bad)


def _hardware(root: Path, wanted: str | None) -> str:
    keys = baselines.hardware_keys(root)
    if not keys:
        raise CliError(f"no baselines stored under {root}")
    if wanted:
        if wanted not in keys:
            raise CliError(f"no baselines for hardware {wanted!r}; stored: {', '.join(keys)}")
        return wanted
    if len(keys) > 1:
        raise CliError(f"several hardware keys stored, pick one with --hardware: {', '.join(keys)}")
    return keys[0]


def _pick(root: Path, stored: _Stored, hardware: str, rev: str | None) -> baselines.BaselineFile:
    """The file of ``rev`` (default: the newest readable one). An unreadable file is an
    error only when it is the one asked for."""
    if rev is None:
        if not stored.files:
            why = "; ".join(stored.bad.values())
            raise CliError(
                f"no readable baseline files for hardware {hardware!r} under {root}"
                + (f" ({why})" if why else "")
            )
        return stored.files[0]
    sha = (gitinfo.rev_parse(str(root), rev) or rev).lower()
    # By file name (the sha the file is stored under), readable or not.
    matches = [f.path.stem for f in stored.files if f.path.stem.startswith(sha)]
    matches += [s for s in stored.bad if s.startswith(sha)]
    if len(matches) != 1:
        what = "no" if not matches else "several"
        raise CliError(f"{what} baseline for revision {rev!r} on hardware {hardware!r}")
    if matches[0] in stored.bad:
        raise CliError(stored.bad[matches[0]])
    return next(f for f in stored.files if f.path.stem == matches[0])


def _rate(value: float | None) -> str:
    return "OOM" if value is None else f"{float(value):.1f}"


def cmd_list(root: Path, _: argparse.Namespace) -> int:
    rows: list[list[str]] = []
    for hardware in baselines.hardware_keys(root):
        # Stored runs carry an anonymous machine id: a key used by several hosts (a CI fleet
        # whose runners share a CPU name) shows it here.
        machines: set[str] = set()
        unknown = False
        first = len(rows)
        for path in baselines.commit_files(root, hardware).values():
            try:
                f = baselines.load(path)
            except baselines.BaselineError as exc:
                rows.append([hardware, path.stem[:10], "-", "-", "-", "", f"unreadable: {exc}"])
                continue
            ids = [i for case in f.cases.values() for i in case.machine_ids or (None,)]
            machines.update(i for i in ids if i)
            unknown = unknown or None in ids
            c = f.commit
            rows.append(
                [
                    hardware,
                    f.sha[:10],
                    f.date[:19],
                    c.get("branch") or "-",
                    str(len(f.cases)),
                    str(len({i for i in ids if i})) or "0",
                    "dirty" if c.get("dirty") else "",
                ]
            )
        if len(rows) > first:
            seen = f"{len(machines)} machine(s)" + (
                " + runs stored without an id" if unknown else ""
            )
            rows.append([hardware, "(all)", "", "", "", str(len(machines)), seen])
    if not rows:
        raise CliError(f"no baselines stored under {root}")
    # Per hardware key: its commits by date, then the "(all)" line.
    rows.sort(key=lambda r: (r[0], r[1] == "(all)", str(r[2])))
    print(
        tabulate(
            rows,
            ["hardware", "commit", "date", "branch", "cases", "machines", "note"],
            disable_numparse=True,
        )
    )
    return 0


def cmd_show(root: Path, args: argparse.Namespace) -> int:
    hardware = _hardware(root, args.hardware)
    stored = _files(root, hardware)
    f = _pick(root, stored, hardware, args.rev)
    stored.warn(skip=f.path.stem)
    print(
        f"{f.path}: commit {f.sha[:10]} ({f.date}, {f.commit.get('branch') or '-'}) on {hardware}"
    )
    rows = [
        [
            key,
            _rate(c.images_per_sec),
            f"{c.rel_iqr:.1%}",
            c.software.get("mxnet", "-"),
        ]
        for key, c in sorted(f.cases.items())
    ]
    print(tabulate(rows, ["case", "img/s", "rel IQR", "mxnet"], disable_numparse=True))
    return 0


def cmd_compare(root: Path, args: argparse.Namespace) -> int:
    hardware = _hardware(root, args.hardware)
    stored = _files(root, hardware)
    old, new = _pick(root, stored, hardware, args.old), _pick(root, stored, hardware, args.new)
    stored.warn()
    policy = Policy(tolerance=args.tolerance)
    price = getattr(args, "price_per_hour", None)
    rows, regressed = [], 0
    for key in sorted(set(old.cases) | set(new.cases)):
        before, after = old.cases.get(key), new.cases.get(key)
        old_rate = None if before is None else before.images_per_sec
        if after is None:
            rows.append([key, _rate(old_rate), "-", "-", "gone"])
            continue
        rate = after.images_per_sec
        change, status = "-", "new"
        if before is not None and old_rate is None:
            status = "oom" if rate is None else Outcome.IMPROVED.value
        elif before is not None and old_rate is not None and rate is None:
            status = Outcome.REGRESSED.value  # out of memory where OLD ran
        elif old_rate is not None and rate is not None:
            noise = stored_noise(after.rel_iqr, before)
            outcome, _, _ = compare_rates(rate, old_rate, noise, after.rel_iqr, policy)
            change, status = f"{rate / old_rate - 1:+.1%}", outcome.value
        regressed += status == Outcome.REGRESSED.value
        rows.append([key, _rate(old_rate), _rate(rate), change, status])
        if price is not None:
            rows[-1].append(_cost_change(old_rate, rate, price))
    print(f"{hardware}: {old.sha[:10]} ({old.date[:10]}) -> {new.sha[:10]} ({new.date[:10]})")
    headers = ["case", "old img/s", "new img/s", "change", "verdict"]
    if price is not None:
        headers.append(f"$/M images at ${price:g}/h")
        rows = [row + ["-"] * (len(headers) - len(row)) for row in rows]
    print(tabulate(rows, headers, disable_numparse=True))
    if regressed:
        print(f"{regressed} case(s) regressed")
    return 1 if regressed else 0


def _cost_change(old_rate: float | None, rate: float | None, price: float) -> str:
    """``$2.50 -> $3.13 (+25.0%)``: dollars per million images before and after."""
    if not old_rate or not rate:
        return "-"
    before = cost.dollars_per_million_images(old_rate, price)
    after = cost.dollars_per_million_images(rate, price)
    return f"${before:,.2f} -> ${after:,.2f} ({after / before - 1:+.1%})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mxperf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--dir", default="baselines", help="baseline directory (default: baselines)"
    )
    parser.add_argument("--hardware", help="hardware key (needed when several are stored)")
    # The same options after the subcommand (`mxperf show REV --hardware KEY`); SUPPRESS keeps
    # a value given before it when they are not repeated.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", default=argparse.SUPPRESS, help="baseline directory")
    common.add_argument("--hardware", default=argparse.SUPPRESS, help="hardware key")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", parents=[common], help="hardware keys and stored commits")
    show = sub.add_parser("show", parents=[common], help="one stored baseline as a table")
    show.add_argument("rev", nargs="?", help="git revision or sha prefix (default: newest)")
    compare = sub.add_parser(
        "compare", parents=[common], help="changes from OLD to NEW; exit 1 on a regression"
    )
    compare.add_argument("old")
    compare.add_argument("new")
    compare.add_argument(
        "--tolerance",
        type=report_command.fraction,
        default=Policy.tolerance,
        help=f"smallest drop that counts as a regression (default {Policy.tolerance:.2f})",
    )
    report_command.add_cost_arguments(compare, epoch=False)
    report_command.add_parser(sub, parents=[common])
    history_commands.add_parsers(sub)
    bisect_command.add_parser(sub)
    merge_command.add_parser(sub)
    comment_command.add_parser(sub)
    args = parser.parse_args(argv)
    root = Path(args.dir)
    commands = {"list": cmd_list, "show": cmd_show, "compare": cmd_compare}
    commands["report"] = report_command.run
    commands["history"] = history_commands.run
    commands["bisect"] = bisect_command.run
    commands["merge"] = merge_command.run
    commands["comment"] = comment_command.run
    try:
        return commands[args.command](root, args)
    except (
        CliError,
        baselines.BaselineError,
        report_command.ReportCommandError,
        *history_commands.ERRORS,
        comment_command.CommentCommandError,
    ) as exc:
        print(f"mxperf: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
