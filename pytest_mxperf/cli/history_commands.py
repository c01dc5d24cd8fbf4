"""``mxperf history``: entries of paired runs in a store, the commit a job pairs with, and the
index they give.

::

    mxperf history add REPORT.json...    append the report's entries to the store
    mxperf history adopt REPORT.json     a pull request's pair as the entries of HEAD
    mxperf history pr-run                the run of the PR workflow whose pair HEAD may adopt
    mxperf history base                  the commit HEAD's job pairs with (last with an entry)
    mxperf history anchor [--every K]    the anchor this job also pairs with, or nothing
    mxperf history show                  the index per case at each commit, steps marked
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from pytest_mxperf.cli import github, pr_run
from pytest_mxperf.history import adoption, anchors, entries, entrystore, fromrun, page
from pytest_mxperf.history.fit import Fit
from pytest_mxperf.history.index import case_fits, commit_order, line_of
from pytest_mxperf.paired.gitcmd import WorktreeError
from pytest_mxperf.reporting.jsonreport import ReportError, read_report

ERRORS = (
    github.GitHubError,
    entries.EntryError,
    entrystore.StoreError,
    anchors.AnchorError,
    WorktreeError,
)


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        help="a directory, or git:BRANCH (default: git:mxperf-history, pushed to --remote)",
    )
    parser.add_argument("--remote", default="origin", help="remote of the branch (default origin)")
    parser.add_argument("--repo", type=Path, default=Path("."), help="the repository (default .)")


def add_no_fetch(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-fetch",
        action="store_true",
        help="read the branch as last fetched (the checkout's copy) without asking the remote: "
        "a step that has no credentials",
    )


def _reading(args: argparse.Namespace) -> entrystore.Store:
    """The store a reading verb names (``--no-fetch``: as last fetched)."""
    return entrystore.open_store(args.store, args.repo, args.remote, not args.no_fetch)


def add_parsers(sub: Any) -> None:
    history = sub.add_parser("history", help="paired ratios over the commits (the index)")
    verbs = history.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", help="append a paired run's JSON report to the store")
    add.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    base = verbs.add_parser("base", help="the commit HEAD's job pairs with")
    for parser in (add, base):
        add_store_arguments(parser)
        parser.add_argument("--rev", default="HEAD", help="the job's commit (default HEAD)")
    add_no_fetch(base)
    anchor = verbs.add_parser("anchor", help="the anchor this job also pairs with, or nothing")
    add_store_arguments(anchor)
    add_no_fetch(anchor)
    anchor.add_argument("--rev", default="HEAD", help="the job's commit (default HEAD)")
    anchor.add_argument(
        "--every",
        type=int,
        default=anchors.DEFAULT_EVERY,
        help=f"one anchor pair every K commits with entries (default {anchors.DEFAULT_EVERY})",
    )
    adopt = verbs.add_parser(
        "adopt",
        help="a pull request's own pair as the entries of the commit it was merged as",
        description="Store the entries of a pull request's paired run as HEAD's (the commit "
        "the PR was merged as) when that run measured HEAD's tree against the commit HEAD's "
        "job pairs with. Exit 0: adopted; 1: adopted, and its pair judged a case regressed; "
        "2: an error; 3: not adopted (the reason is printed; the job then pairs as usual).",
    )
    adopt.add_argument("report", type=Path, metavar="REPORT.json")
    add_store_arguments(adopt)
    add_no_fetch(adopt)
    adopt.add_argument("--rev", default="HEAD", help="the job's commit (default HEAD)")
    adopt.add_argument(
        "--check", action="store_true", help="say whether it would be adopted; store nothing"
    )
    pr_run.add_arguments(
        verbs.add_parser(
            "pr-run",
            help="the id of the PR workflow's run whose pair HEAD may adopt, or nothing",
            description=(pr_run.__doc__ or "").split("\n\n")[1],
        )
    )
    show = verbs.add_parser("show", help="the index per case at each commit")
    add_store_arguments(show)
    add_no_fetch(show)
    show.add_argument("--no-anchors", action="store_true", help="fit the chain pairs only")


def cmd_add(args: argparse.Namespace) -> int:
    found: list[entries.Entry] = []
    for path in args.reports:
        try:
            report = read_report(path)
        except ReportError as exc:
            raise entries.EntryError(str(exc)) from None
        got = entries.from_report(report, str(path))
        if not got:
            raise entries.EntryError(f"{path}: no case of this paired run measured a ratio")
        found += got
    found = fromrun.with_subjects(found, args.repo)
    where = entrystore.open_store(args.store, args.repo, args.remote)
    added = where.add(found)
    print(f"mxperf history: {added} new of {len(found)} entries in {where.describe()}")
    return 0


#: `mxperf history adopt`'s exit status when the pair is not this commit's step.
NOT_ADOPTED = 3


def cmd_adopt(args: argparse.Namespace) -> int:
    try:
        report = read_report(args.report)
    except ReportError as exc:
        raise entries.EntryError(str(exc)) from None
    where = _reading(args)
    try:
        got = adoption.adopt(
            report, str(args.report), args.repo, entrystore.read_store(where), args.rev
        )
    except adoption.NotAdopted as exc:
        print(f"mxperf history: not adopted: {exc}")
        return NOT_ADOPTED
    what = (
        f"{len(got.entries)} entries: the pair of {got.measured[:10]} with {got.base[:10]}, "
        f"the tree of {args.rev}"
    )
    if args.check:
        print(f"mxperf history: adoptable: {what}")
    else:
        added = where.add(fromrun.with_subjects(got.entries, args.repo))
        print(f"mxperf history: adopted {what}; {added} new in {where.describe()}")
    if got.regressed:
        print(f"mxperf history: that pair judged regressed: {', '.join(got.regressed)}")
        return 1
    return 0


def cmd_base(args: argparse.Namespace) -> int:
    print(anchors.base(args.repo, entrystore.read_store(_reading(args)), args.rev))
    return 0


def cmd_anchor(args: argparse.Namespace) -> int:
    found = anchors.anchor(args.repo, entrystore.read_store(_reading(args)), args.rev, args.every)
    if found:
        print(found)
    return 0


def show_fit(case: str, fitted: Fit) -> None:
    marked = {s.commit for s in fitted.steps if s.changed}
    print(f"{case}: index (1.0 at {fitted.points[0].commit[:10]}), {fitted.level:.0%} interval")
    steps = {s.commit: s for s in fitted.steps}
    for p in fitted.points:
        step = steps.get(p.commit)
        text = "" if step is None else f"  step {step.ratio - 1:+.1%}"
        mark = "  CHANGED" if p.commit in marked else ""
        print(f"  {p.commit[:10]}  {p.index:.4f}  [{p.low:.4f} .. {p.high:.4f}]{text}{mark}")
    if fitted.note:
        print(f"  note: {fitted.note}")
    print(f"  a step is marked (CHANGED) when {page.mark_rule(fitted.step_level, fitted.min_step)}")


def cmd_show(args: argparse.Namespace) -> int:
    where = _reading(args)
    found = entrystore.read_store(where)
    if not found:
        raise entrystore.StoreError(f"no entries in {where.describe()}")
    order = commit_order(found, line_of(args.repo))
    for case, fitted in case_fits(found, order, anchors=not args.no_anchors).items():
        show_fit(case, fitted)
    return 0


def history_page(spec: str, repo: Path = Path("."), fetch: bool = True) -> str:
    """The history page's index section from the store ``spec`` (`history.page`; ``fetch``:
    a git store is fetched first, else read as last fetched)."""
    where = entrystore.open_store(spec, repo, fetch=fetch)
    found = entrystore.read_store(where)
    if not found:
        raise entrystore.StoreError(f"no entries in {where.describe()}")
    order = commit_order(found, line_of(repo))
    subjects = {c: fromrun.subject(repo, c) for c in order}
    # A page meant to be published names a directory by its name, never this machine's path.
    shown = (
        f"directory {where.path.name}"
        if isinstance(where, entrystore.DirStore)
        else where.describe()
    )
    return page.index_section(page.index_data(found, case_fits(found, order), subjects), shown)


def cmd_pr_run(args: argparse.Namespace) -> int:
    return pr_run.run(args, os.environ)


COMMANDS = {
    "add": cmd_add,
    "adopt": cmd_adopt,
    "base": cmd_base,
    "anchor": cmd_anchor,
    "show": cmd_show,
    "pr-run": cmd_pr_run,
}


def run(root: Path, args: argparse.Namespace) -> int:
    """``mxperf history VERB`` (``root``, the baseline directory, is not used)."""
    del root
    return COMMANDS[args.verb](args)
