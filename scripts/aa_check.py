"""A/A and slowdown check on real MXNet: how often identical runs fail, how often slow ones pass.

Makes a git repository in a temporary directory with a one-test suite (a tiny model-zoo net,
see ``REAL_SUITE`` in `pytest_mxperf.testing`), stores its baseline with
``pytest --mxperf --mxperf-update``, then runs ``pytest --mxperf`` again ``--runs`` times for
each slowdown (0 = identical runs) as separate processes, and prints every change and verdict.

    python scripts/aa_check.py --runs 10 --slowdowns 0,0.2,0.3,0.4 --model resnet18_v1 --size 32
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_mxperf.testing import GIT_ENV, REAL_SUITE


def run(cwd: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    report = cwd / "report.json"
    report.unlink(missing_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--mxperf",
            "-k",
            "target",
            "--mxperf-json",
            str(report),
            *args,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    cases = json.loads(report.read_text())["cases"] if report.exists() else []
    if not cases:
        raise SystemExit(f"the benchmark run measured nothing:\n{done.stdout[-3000:]}")
    return dict(cases[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slowdowns", default="0,0.4", help="extra work per batch, e.g. 0,0.4")
    parser.add_argument("--model", default="resnet18_v1")
    parser.add_argument("--size", type=int, default=32)
    args = parser.parse_args()
    env = {
        **os.environ,
        **GIT_ENV,
        "MXPERF_TEST_MODEL": args.model,
        "MXPERF_TEST_SIZE": str(args.size),
    }
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        (repo / "test_suite.py").write_text(REAL_SUITE)
        (repo / ".gitignore").write_text("report.json\n__pycache__/\n")
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "suite"]):
            subprocess.run(["git", *cmd], cwd=repo, env=env, check=True)
        base = run(repo, {**env, "MXPERF_EXTRA_WORK": "0"}, "--mxperf-update")
        print(
            f"baseline: {base['key']} {base['measurement']['images_per_sec']:.1f} img/s "
            f"(attempts {', '.join(f'{a:.1f}' for a in base['attempts'])})"
        )
        for slowdown in (float(s) for s in args.slowdowns.split(",")):
            failed = 0
            changes = []
            for i in range(args.runs):
                case = run(repo, {**env, "MXPERF_EXTRA_WORK": str(slowdown)})
                v = case["verdict"]
                failed += bool(v["failed"])
                changes.append(v["change"])
                print(
                    f"  extra work {slowdown:.0%} run {i + 1}: {v['change']:+.1%} "
                    f"(threshold {v['threshold']:.1%}) {v['status']}",
                    flush=True,
                )
            worst = min(changes)
            print(
                f"extra work {slowdown:.0%}: {failed}/{args.runs} failed, changes "
                f"{min(changes):+.1%} .. {max(changes):+.1%} (worst {worst:+.1%})",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
