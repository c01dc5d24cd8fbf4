"""The example user project's workflows run here, scenario by scenario, printing each rendered
PR comment (to paste into a review note) and the wall time of the real-MXNet scenario.

The same harness as tests/plugin/test_workflow_recipe.py (`pytest_mxperf.testing.
workflow_scenarios`): a scratch repository made from examples/user-project, a fake GitHub API on
127.0.0.1, the plugin as installed in this environment (the install step is stood in for). The
fake back end measures the scenarios that need a change of speed; the identical PR also runs
with real MXNet on one tiny case. Measure the wall time on an otherwise idle machine.

    python scripts/workflow_demo.py            # all scenarios
    python scripts/workflow_demo.py --no-real  # the fake-back-end ones only
    python scripts/workflow_demo.py --example DIR  # another copy of the example project

Each job's outcome is checked against the scenario's (the slower PR's benchmark job fails, every
other job succeeds, one comment per PR): exit 1 when one differs, so scripts/wheel_check.sh can
run the recipes with the plugin installed from its wheel.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from pytest_mxperf.testing import workflow_scenarios as ws
from pytest_mxperf.testing.workflow_steps import RunResult

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user-project"

#: Jobs whose outcome was not the scenario's: "workflow / job: got, expected".
UNEXPECTED: list[str] = []


def show(
    title: str, runs: list[RunResult], comment: str | None, failing: tuple[str, ...] = ()
) -> None:
    """Print the scenario's jobs and comment; a job not in ``failing`` ("workflow / job") must
    succeed (or be skipped by its own condition), one in it must fail."""
    print(f"\n=== {title}")
    for run in runs:
        for name, job in run.jobs.items():
            print(f"    {run.workflow} / {name}: {job.outcome}")
            expected = "failure" if f"{run.workflow} / {name}" in failing else "success"
            if job.outcome not in (expected, "skipped"):
                UNEXPECTED.append(
                    f"{title}: {run.workflow} / {name}: {job.outcome}, not {expected}"
                )
    if comment is not None:
        print("\n" + comment)


def fake_scenarios(root: Path, example: Path) -> None:
    with ws.scenarios(example, root / "fake") as s:
        s.project.set_speeds(MLP=7200.0)
        slower = s.project.commit("mynets: a slower MLP")
        runs = list(s.pull_request(1, slower, fork=True))
        show(
            "fork PR, one case 10% slower",
            runs,
            ws.comment_of(s, 1),
            failing=("mxperf-pr / benchmarks",),
        )
        s.project.set_speeds(MLP=8000.0)
        fixed = s.project.commit("mynets: the MLP as fast as before")
        runs = list(s.pull_request(1, fixed, fork=True))
        show("second push to the same PR (fixed): the comment updated", runs, ws.comment_of(s, 1))
        print(f"    comments on the PR: {len(s.api.comments[1])}")
        if len(s.api.comments[1]) != 1:
            UNEXPECTED.append(f"{len(s.api.comments[1])} comments on the PR, not 1")
        before = s.project.main_sha()
        s.project.commit("merge")
        show(
            "push to main, paired with the last commit in the history", [s.push_main(before)], None
        )
        entries = len(ws.history_on_origin(s))
        print(f"    entries on mxperf-history: {entries}")
        if entries == 0:
            UNEXPECTED.append("the push to main added no entry to mxperf-history")


def real_scenario(root: Path, example: Path) -> float:
    started = time.monotonic()
    with ws.scenarios(example, root / "real", fake=False, env=ws.QUICK_REAL) as s:
        (s.project.work / "README.md").write_text("Only the words change.\n")
        sha = s.project.commit("docs")
        runs = list(s.pull_request(2, sha))
        wall = time.monotonic() - started
        show("identical PR, real MXNet (one tiny case)", runs, ws.comment_of(s, 2))
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-real", action="store_true", help="skip the real-MXNet scenario")
    parser.add_argument(
        "--example", type=Path, default=EXAMPLE, help="the example project (default: this one's)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mxperf-workflow-demo-") as tmp:
        fake_scenarios(Path(tmp), args.example)
        if not args.no_real:
            wall = real_scenario(Path(tmp), args.example)
            print(f"\nreal-MXNet identical PR: {wall:.1f} s wall (PR job and comment job)")
    for line in UNEXPECTED:
        print(f"workflow_demo: unexpected: {line}", file=sys.stderr)
    return 1 if UNEXPECTED else 0


if __name__ == "__main__":
    sys.exit(main())
