"""``mxperf bisect GOOD BAD [-k EXPR] [--store S] [-- PYTEST ARGS]``: the first commit whose
paired ratio against GOOD is beyond the minimum effect (`pytest_mxperf.history.bisection`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_mxperf.cli.history_commands import add_store_arguments
from pytest_mxperf.history import bisection, entries, entrystore
from pytest_mxperf.paired.gitcmd import git


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "bisect", help="the first commit after GOOD whose paired run against GOOD moved"
    )
    parser.add_argument("good", metavar="GOOD")
    parser.add_argument("bad", metavar="BAD")
    parser.add_argument("-k", dest="select", metavar="EXPR", help="pytest's -k: the case(s)")
    add_store_arguments(parser)
    parser.add_argument(
        "pytest_args", nargs="*", metavar="PYTEST ARG", help="more pytest arguments, after --"
    )


def _subject(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%h %s", sha).stdout.strip()


def run(root: Path, args: argparse.Namespace) -> int:
    """Exit 0 when one commit is named, 1 when skipped steps leave several."""
    del root
    repo = args.repo
    good, bad = bisection.resolve(repo, args.good), bisection.resolve(repo, args.bad)
    commits = bisection.candidates(repo, good, bad)
    extra = (["-k", args.select] if args.select else []) + list(args.pytest_args)
    where = entrystore.open_store(args.store, repo, args.remote) if args.store else None
    oracle = bisection.paired_step(repo, good, extra)
    print(f"mxperf bisect: {len(commits)} commit(s) after {good[:10]} up to {bad[:10]}")

    def step(commit: str) -> bisection.StepResult:
        result = oracle(commit)
        print(f"  {_subject(repo, commit)}: {result.verdict}: {result.detail}", flush=True)
        if where is not None and result.report is not None:
            found = entries.from_report(result.report, f"the paired run at {commit[:10]}")
            where.add(found)
        return result

    outcome = bisection.search(commits, step)
    print(f"mxperf bisect: {len(outcome.steps)} paired run(s)")
    if outcome.first is not None:
        print(f"first commit that moved: {_subject(repo, outcome.first)}")
        return 0
    print("undecided steps leave several commits; the first that moved is one of:")
    for sha in outcome.suspects:
        print(f"  {_subject(repo, sha)}")
    return 1
