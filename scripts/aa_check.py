"""A/A and slowdown check on real MXNet: how often identical code fails, how often slower code
is caught, for the paired mode and for stored baselines with arbitration.

Makes a git repository in a temporary directory with a one-test suite (a tiny model-zoo net,
``REAL_SUITE`` in `pytest_mxperf.testing`) whose work per batch comes from a committed file:
commit A does the plain work; for each slowdown a commit B adds that much extra forward work
per batch (0.11 = 11% more work, a ~10% lower throughput). Every run is its own process.

- ``paired``: ``pytest --mxperf --mxperf-ab A`` at B, ``--runs`` times per slowdown.
- ``stored``: baselines stored at A by ``--stores`` ``--mxperf-update`` runs, then
  ``pytest --mxperf`` at B (arbitration on, the default), ``--runs`` times per slowdown.
- ``floor``: as ``stored`` with ``--mxperf-arbitrate off``: the stored figure and its floor
  alone judge (no pair confirms or clears). ``--modes floor --slowdowns 0`` is the false-alarm
  rate of identical re-runs that tests/plugin/test_real_regression.py checks the logic of.
- ``host``: both cases stored at A, their figures raised 40% in the files (as if stored on a
  faster host) and committed; then one default run with identical code, and one with the
  largest slowdown in the target model only.
- ``cost``: ``--cost-runs`` plain runs (``pytest --mxperf -k target``, no baseline, nothing to
  arbitrate) for the wall-time figures: a paired run's wall against a plain run's, and a
  stored-baseline run's wall with and without arbitration.

``--model convs20 --batch 8`` is the round-3 user's net (20 Conv2D of 32 channels). In paired mode
every run also prints the mean log ratio of its interleaved block pairs, its standard error and
z; for identical code the summary counts runs with |z| > 2.58 (a bias between the sides that
the rounds' interval does not allow for).

Every line is printed as it is measured; a ``SUMMARY`` block at the end repeats the figures
(failures out of ``--runs`` per mode and slowdown, the host check's counts, the wall times).

    python scripts/aa_check.py --modes cost,paired,stored,host --runs 10 \
        --slowdowns 0,0.053,0.11,0.25
    python scripts/aa_check.py --modes cost,paired --model convs20 --batch 8 --size 32 \
        --slowdowns 0 --model-b convs21 --pytest-args "--mxperf-min-effect 0.03"

``--model-b convs21`` makes commit B's net one Conv2D longer (about 4.5% more work in every
step, as a user's change would be); extra work per batch comes in lumps (one more forward every
so many steps), which a fast net's median block can miss.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_mxperf.testing.procs import end_on_sigterm
from pytest_mxperf.testing.repos import GIT_ENV, REAL_SUITE, inflate_baselines


def git(repo: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def pytest_run(repo: Path, env: dict[str, str], *args: str) -> tuple[dict[str, Any], float]:
    """One ``pytest --mxperf -k target`` process: its target case from the JSON report."""
    cases, seconds = pytest_cases(repo, env, "-k", "target", *args)
    return cases[0], seconds


def pytest_cases(repo: Path, env: dict[str, str], *args: str) -> tuple[list[dict[str, Any]], float]:
    """One ``pytest --mxperf`` process: every case of its JSON report."""
    report = repo.parent / "report.json"
    report.unlink(missing_ok=True)
    start = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mxperf"),
            *("--mxperf-json", str(report), *args),
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - start
    cases = json.loads(report.read_text())["cases"] if report.exists() else []
    if not cases:
        raise SystemExit(f"the benchmark run measured nothing:\n{done.stdout[-3000:]}")
    return [dict(c) for c in cases], seconds


def host_check(
    repo: Path, env: dict[str, str], base: str, stores: int, extra: float, summary: list[str]
) -> None:
    """Baselines of both cases stored at A, raised 40% (committed), then the default run with
    identical code and with ``extra`` more work in the target model only."""
    git(repo, env, "checkout", "-q", "-B", "host", base)
    for stale in (repo / "baselines").rglob("*.json"):
        stale.unlink()  # left untracked by the stored mode
    for i in range(stores):
        cases, _ = pytest_cases(repo, env, "--mxperf-update")
        print(f"host: stored run {i + 1}: " + ", ".join(describe_rate(c) for c in cases))
    inflate_baselines(repo, 1.4)  # as if stored on a faster host
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-qm", "baselines raised 40%: stored on a faster host")
    for work in (0.0, extra):
        commit_work(repo, env, work, f"target: {work:.0%} more work")
        cases, seconds = pytest_cases(repo, env)
        print(f"host: target with {work:.0%} more work ({seconds:.0f} s, load {loadavg()}):")
        for c in cases:
            print(f"  {c['key']}: {describe(c)} failed={c['verdict']['failed']}")
            print("    " + c["verdict"]["message"].replace("\n", "\n    "))
        failed = sorted(c["model"] for c in cases if c["verdict"]["failed"])
        statuses = ", ".join(f"{c['model']} {c['verdict']['status']}" for c in cases)
        summary.append(
            f"host (+40% stored), target {work:.0%} more work: {len(failed)}/{len(cases)} "
            f"failed ({', '.join(failed) or 'none'}); verdicts: {statuses}; {seconds:.0f} s"
        )


def describe_rate(case: dict[str, Any]) -> str:
    return f"{case['model']} {case['measurement']['images_per_sec']:.1f} img/s"


def commit_work(
    repo: Path, env: dict[str, str], extra: float, message: str, model: str | None = None
) -> str:
    (repo / "extra_work.txt").write_text(f"{extra}\n")
    if model:  # the net itself changed (e.g. convs21: one Conv2D more than convs20)
        (repo / "model.txt").write_text(f"{model}\n")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-qm", message, "--allow-empty")
    return git(repo, env, "rev-parse", "HEAD")


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def describe(case: dict[str, Any]) -> str:
    v = case["verdict"]
    interval = v.get("interval")
    span = f" [{interval[0] - 1:+.1%}, {interval[1] - 1:+.1%}]" if interval else ""
    change = "-" if v.get("change") is None else f"{v['change']:+.1%}"
    rounds = f" {v['rounds']} rounds" if v.get("rounds") else ""
    return f"{change}{span}{rounds} {v['status']}"


def paired_record(report: Path) -> dict[str, Any]:
    """The ``paired`` record of a paired run's JSON report ({} without one)."""
    if not report.exists():
        return {}
    record = json.loads(report.read_text()).get("paired")
    return record if isinstance(record, dict) else {}


def side_bias(paired: dict[str, Any]) -> tuple[float, float, int] | None:
    """Mean log ratio HEAD/REV over every interleaved block pair of a paired run's one case, its
    standard error and the pair count (None without two pairs). For identical code the mean is
    a bias between the sides; the rounds' interval assumes there is none, so |mean / SE| above
    2.58 in more than about 1 run in 100 says the sides differ by more than their code."""
    logs: list[float] = []
    for rnd in paired.get("rounds", []):
        try:
            rev, head = (next(iter(rnd[side]["blocks"].values())) for side in ("rev", "head"))
        except (KeyError, StopIteration):
            continue
        if rev["interleaved"] and head["interleaved"]:
            logs += [math.log(b / a) for a, b in zip(rev["images_per_sec"], head["images_per_sec"])]
    n = len(logs)
    if n < 2:
        return None
    mean = math.fsum(logs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (n - 1))
    return mean, sd / math.sqrt(n), n


def median_of(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="cost,paired,stored,host")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cost-runs", type=int, default=3, help="plain runs for the cost figure")
    parser.add_argument("--stores", type=int, default=3, help="--mxperf-update runs at A")
    parser.add_argument("--slowdowns", default="0,0.053,0.11,0.25", help="extra work per batch")
    parser.add_argument("--model", default="resnet18_v1")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument(
        "--model-b", help="commit B also changes the target's net to this one (e.g. convs21)"
    )
    parser.add_argument(
        "--pytest-args",
        default="",
        help="more options for every pytest run, e.g. '--mxperf-min-effect 0.03' (PYTEST_ADDOPTS)",
    )
    args = parser.parse_args()
    env = {
        **os.environ,
        **GIT_ENV,
        "MXPERF_TEST_MODEL": args.model,
        "MXPERF_TEST_SIZE": str(args.size),
        "MXPERF_TEST_BATCH": str(args.batch),
    }
    env.pop("MXPERF_EXTRA_WORK", None)
    env["PYTEST_ADDOPTS"] = args.pytest_args
    slowdowns = [float(s) for s in args.slowdowns.split(",")]
    summary: list[str] = []
    plain: list[float] = []
    walls: dict[tuple[str, float], list[float]] = {}
    arbitrated: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / "test_suite.py").write_text(REAL_SUITE)
        (repo / ".gitignore").write_text("__pycache__/\n")
        git(repo, env, "init", "-q", "-b", "main")
        base = commit_work(repo, env, 0.0, "A: plain work")
        for mode in args.modes.split(","):
            git(repo, env, "checkout", "-q", base)
            if mode == "host":
                host_check(repo, env, base, args.stores, max(slowdowns), summary)
                continue
            if mode == "cost":
                for i in range(args.cost_runs):
                    case, seconds = pytest_run(repo, env)  # no baseline: measure and report
                    plain.append(seconds)
                    print(f"  plain run {i + 1}: {describe_rate(case)} ({seconds:.0f} s)")
                continue
            start = base
            if mode in ("stored", "floor"):
                for i in range(args.stores):
                    case, _ = pytest_run(repo, env, "--mxperf-update")
                    print(f"stored run {i + 1}: {case['measurement']['images_per_sec']:.1f} img/s")
                # The baselines of A, committed on top of A: every B branches from here.
                git(repo, env, "checkout", "-q", "-B", "stored", base)
                git(repo, env, "add", "-A")
                git(repo, env, "commit", "-qm", "baselines of A")
                start = git(repo, env, "rev-parse", "HEAD")
            for extra in slowdowns:
                git(repo, env, "checkout", "-q", "-B", f"b-{mode}-{extra}", start)
                commit_work(repo, env, extra, f"B: {extra:.0%} more work", args.model_b)
                failed, changes, these = 0, [], walls.setdefault((mode, extra), [])
                zs: list[float] = []
                second = 0  # runs whose pair found a regression and paired it again
                for i in range(args.runs):
                    extra_args = ["--mxperf-ab", base] if mode == "paired" else []
                    if mode == "floor":
                        extra_args = ["--mxperf-arbitrate", "off"]
                    case, seconds = pytest_run(repo, env, *extra_args)
                    v = case["verdict"]
                    failed += bool(v["failed"])
                    these.append(seconds)
                    if mode == "stored":  # a pair ran: the verdict carries its rounds
                        arbitrated[bool(v.get("rounds"))].append(seconds)
                    if v.get("change") is not None:
                        changes.append(v["change"])
                    record = paired_record(repo.parent / "report.json")
                    bias = side_bias(record) if mode == "paired" else None
                    said = ""
                    if bias is not None:
                        mean, se, n = bias
                        zs.append(mean / se if se > 0 else 0.0)
                        said = f", block pairs {mean:+.1%} (SE {se:.1%}, n {n}, z {zs[-1]:+.1f})"
                    # A regression's second run on fresh processes (--mxperf-pair-confirm).
                    again = side_bias(record.get("confirmation") or {})
                    if again is not None:
                        second += 1
                        mean, se, n = again
                        said += f"; second run {mean:+.1%} (SE {se:.1%}, n {n})"
                    print(
                        f"  {mode} extra {extra:.1%} run {i + 1}: {describe(case)} "
                        f"({seconds:.0f} s, load {loadavg()}{said})",
                        flush=True,
                    )
                measured = f"{median_of(changes):+.1%}" if changes else "-"
                line = (
                    f"{mode}: extra work {extra:.1%} (throughput -{1 - 1 / (1 + extra):.1%}, "
                    f"median measured change {measured}): {failed}/{args.runs} failed "
                    f"({second} paired twice); wall "
                    f"{min(these):.0f}-{max(these):.0f} s per run, median {median_of(these):.0f} s"
                )
                print(line, flush=True)
                summary.append(line)
                if zs and extra == 0:
                    far = sum(abs(z) > 2.58 for z in zs)
                    line = (
                        f"{mode}: A/A bias between the sides: |z| > 2.58 in {far}/{len(zs)} runs "
                        f"(about 1% by chance), mean |z| {math.fsum(map(abs, zs)) / len(zs):.2f} "
                        "(about 0.8 by chance)"
                    )
                    print(line, flush=True)
                    summary.append(line)
    if plain:
        summary.append(
            f"cost: plain run (no baseline) median {median_of(plain):.0f} s over {len(plain)} runs"
        )
        paired_walls = [w for (m, _), ws in walls.items() if m == "paired" for w in ws]
        if paired_walls:
            ratio = median_of(paired_walls) / median_of(plain)
            summary.append(
                f"cost: paired run median {median_of(paired_walls):.0f} s = {ratio:.2f}x the "
                "plain run (target: at most 2.5x)"
            )
        # A regression costs more (rounds until it is certain, then a profile): per slowdown.
        for (m, extra), ws in sorted(walls.items()):
            if m == "paired" and ws:
                summary.append(
                    f"cost: paired, extra work {extra:.1%}: median {median_of(ws):.0f} s = "
                    f"{median_of(ws) / median_of(plain):.2f}x the plain run"
                )
    for was, label in ((False, "without a pair (not suspected)"), (True, "with arbitration")):
        if arbitrated[was]:
            summary.append(
                f"cost: stored-baseline runs {label}: {len(arbitrated[was])} runs, median "
                f"{median_of(arbitrated[was]):.0f} s"
            )
    what = f"model {args.model}, {args.size}px, {args.runs} runs per line"
    if args.model_b:
        what += f", B's net {args.model_b}"
    print(f"\nSUMMARY ({what}, options {args.pytest_args!r})")
    for line in summary:
        print("  " + line)
    return 0


if __name__ == "__main__":
    end_on_sigterm()  # a SIGTERM ends the pytest run it waits on too
    sys.exit(main())
