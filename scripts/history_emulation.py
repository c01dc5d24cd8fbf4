"""An emulated history of a user project in which every main-branch job is a new machine.

Builds a user project (a git repository pushed to a bare "origin" on disk) commit by commit:
commit 10 makes case ``alpha`` about 8% slower, commit 20 makes case ``beta`` about 5% faster,
every other commit changes a notes file only. After each commit is pushed, its main-branch job
runs as a new VM would: a fresh clone, fresh processes, optionally under a different load from
the noisy neighbour (``--noise PATH/noisy_neighbour.py``: its duty and CPUs change every job),
and does what the example's main workflow does (docs/history.md):

    ONLY_RATIO="--mxperf-pair-confirm off --mxperf-pair-profile off"
    BASE=$(mxperf history base --no-fetch)
    pytest --mxperf --mxperf-ab "$BASE" $ONLY_RATIO --mxperf-json pair.json
    ANCHOR=$(mxperf history anchor --no-fetch --every K)   # every K-th job: also the anchor
    [ -n "$ANCHOR" ] && pytest --mxperf --mxperf-ab "$ANCHOR" $ONLY_RATIO \
        --mxperf-json anchor.json
    mxperf history add pair.json                   # pushed to origin's mxperf-history
    [ -f anchor.json ] && mxperf history add anchor.json

and, for the cost, a plain run of the same suite (``pytest --mxperf``) in the same clone.

At the end it prints the index of each case at each commit (fitted with the anchors), the
steps marked (and the rule they are marked by), the 95% interval at the last commit with and
without the anchors, and each job's wall time beside its plain run's: per job, the anchored
and the other jobs apart, and in all.

    python scripts/history_emulation.py --fake --commits 6 --every 2     # logic, seconds
    nice -n 19 python scripts/history_emulation.py --commits 4 --every 2  # real MXNet, tiny
    python scripts/history_emulation.py --commits 30 \
        --noise ../shared/tools/noisy_neighbour.py --keep /tmp/emu5       # the measurement

``--fake`` measures on the fake back end (exact, noiseless figures: the logic only, no noise
reaches it); without it each case is a tiny Gluon network on real MXNet whose extra work per
batch is committed in ``work.txt``.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_mxperf.history import entrystore, page
from pytest_mxperf.history.index import case_fits, commit_order, line_of
from pytest_mxperf.paired.forkserver import DEFAULT_PRELOAD, PRELOAD_ENV, default_preload
from pytest_mxperf.testing.procs import end_on_sigterm
from pytest_mxperf.testing.repos import GIT_ENV

FAKE_CONFTEST = """
import pytest
from pytest_mxperf.testing import FakeBackend

@pytest.fixture(scope="session")
def mxperf_backend():
    return FakeBackend()
"""

FAKE_SUITE = """
import pathlib
import pytest
from pytest_mxperf.testing import FakeModel

TEXT = pathlib.Path(__file__).with_name("work.txt").read_text()
WORK = dict(line.split("=") for line in TEXT.split())

@pytest.mark.parametrize("case", sorted(WORK))
def test_case(mxperf, case):
    rate = 400.0 / (1.0 + float(WORK[case]))
    mxperf.inference(FakeModel(images_per_sec=rate), batch_size=8, model=case)
"""

#: Each case a tiny MLP; ``work.txt`` says how many extra forward passes per batch it does
#: (0.087 more work: about 8% slower).
REAL_SUITE = """
import pathlib
import pytest

TEXT = pathlib.Path(__file__).with_name("work.txt").read_text()
WORK = dict(line.split("=") for line in TEXT.split())

@pytest.mark.parametrize("case", sorted(WORK))
def test_case(mxperf, case):
    import mxnet as mx
    from mxnet.gluon import nn

    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"), nn.Dense(256, activation="relu"), nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.random.uniform(-1, 1, shape=(32, 256))
    extra, owed = float(WORK[case]), [0.0]

    def step():
        out = net(x)
        owed[0] += extra
        while owed[0] >= 1.0:
            out = net(x)
            owed[0] -= 1.0
        return out

    mxperf.callable(step, items_per_call=32, model=case)
"""

#: The history's pairs only measure the ratio (as the example's main workflow runs them).
ONLY_RATIO = ("--mxperf-pair-confirm", "off", "--mxperf-pair-profile", "off")

#: Extra work per case before/after the two changes: alpha 8% slower at --slow-at, beta 5%
#: faster at --fast-at, gamma never changes.
BEFORE = {"alpha": 0.0, "beta": 0.05, "gamma": 0.0}
AFTER = {"alpha": 0.087, "beta": 0.0, "gamma": 0.0}


def run(cwd: Path, env: dict[str, str], *argv: str, check: bool = True) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=7200)
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed in {cwd}:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip()


def mxperf(cwd: Path, env: dict[str, str], *args: str) -> str:
    return run(cwd, env, sys.executable, "-m", "pytest_mxperf.cli.commands", *args)


def pytest(cwd: Path, env: dict[str, str], *args: str) -> float:
    """One pytest process; its wall time (failed verdicts are results, not errors)."""
    start = time.monotonic()
    run(
        cwd, env, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, check=False
    )
    return time.monotonic() - start


def work_at(i: int, args: argparse.Namespace) -> dict[str, float]:
    work = dict(BEFORE)
    if i >= args.slow_at:
        work["alpha"] = AFTER["alpha"]
    if i >= args.fast_at:
        work["beta"] = AFTER["beta"]
    return work


def make_commit(dev: Path, env: dict[str, str], i: int, args: argparse.Namespace) -> None:
    (dev / "work.txt").write_text(" ".join(f"{k}={v}" for k, v in work_at(i, args).items()))
    (dev / "notes.txt").write_text(f"commit {i}\n")
    what = {args.slow_at: ": alpha 8% slower", args.fast_at: ": beta 5% faster"}.get(i, "")
    run(dev, env, "git", "add", "-A")
    run(dev, env, "git", "commit", "-qm", f"commit {i}{what}")
    run(dev, env, "git", "push", "-q", "origin", "HEAD:main")


def setup(root: Path, env: dict[str, str], args: argparse.Namespace) -> Path:
    origin, dev = root / "origin.git", root / "dev"
    run(root, env, "git", "init", "-q", "--bare", "-b", "main", str(origin))
    run(root, env, "git", "clone", "-q", str(origin), str(dev))
    (dev / "test_suite.py").write_text(FAKE_SUITE if args.fake else REAL_SUITE)
    if args.fake:
        (dev / "conftest.py").write_text(FAKE_CONFTEST)
    (dev / ".gitignore").write_text("*.json\n__pycache__/\n")
    return origin


def job(
    root: Path, origin: Path, env: dict[str, str], i: int, args: argparse.Namespace
) -> tuple[float, float, bool]:
    """Commit ``i``'s main-branch job on a fresh clone: (job's wall, plain run's wall, anchored)."""
    clone = root / f"job-{i}"
    noise = None
    if args.noise:
        duty = random.Random(i).uniform(0.1, 0.6)
        cpus = ("0", "1", "0,1")[i % 3]
        noise = subprocess.Popen(
            [
                sys.executable,
                str(args.noise),
                "--seconds",
                "3600",
                "--duty",
                f"{duty:.2f}",
                "--cpus",
                cpus,
                "--seed",
                str(i),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        start = time.monotonic()
        run(root, env, "git", "clone", "-q", str(origin), str(clone))
        more = [*ONLY_RATIO, *shlex.split(args.pair_args)]
        base = mxperf(clone, env, "history", "base", "--no-fetch")
        pytest(clone, env, "--mxperf", "--mxperf-ab", base, *more, "--mxperf-json", "pair.json")
        anchor = mxperf(clone, env, "history", "anchor", "--no-fetch", "--every", str(args.every))
        if anchor:
            argv = ["--mxperf-ab", anchor, *more, "--mxperf-json", "anchor.json"]
            pytest(clone, env, "--mxperf", *argv)
        mxperf(clone, env, "history", "add", "pair.json")
        if anchor and (clone / "anchor.json").exists():
            mxperf(clone, env, "history", "add", "anchor.json")
        wall = time.monotonic() - start
        plain = pytest(clone, env, "--mxperf")
    finally:
        if noise is not None:
            noise.terminate()
            noise.wait(timeout=30)
        shutil.rmtree(clone, ignore_errors=True)
    return wall, plain, bool(anchor)


def report(
    origin: Path, walls: list[tuple[int, float, float, bool]], args: argparse.Namespace
) -> None:
    found = entrystore.GitStore(origin).read()
    line = line_of(origin, "main")
    order = commit_order(found, line)
    number = {sha: n for n, sha in enumerate(line)}
    anchored = case_fits(found, order)
    chain = case_fits(found, order, anchors=False)
    for case, fitted in anchored.items():
        print(f"\n{case}: index at each commit (95% interval), fitted with anchors")
        steps = {s.commit: s for s in fitted.steps}
        for p in fitted.points:
            s = steps.get(p.commit)
            step = (
                ""
                if s is None
                else f"  step {s.ratio - 1:+6.1%} [{s.low - 1:+.1%} .. {s.high - 1:+.1%}]"
            )
            mark = "  MARKED" if s is not None and s.changed else ""
            at = f"{p.index:.4f} [{p.low:.4f} .. {p.high:.4f}]"
            print(f"  commit {number[p.commit]:3d}  {at}{step}{mark}")
        marked = [number[s.commit] for s in fitted.steps if s.changed]
        print(f"  marked steps: commits {marked or 'none'}")
        last = fitted.points[-1].commit
        for name, f in (("with anchors", fitted), ("chain only", chain[case])):
            p = f.point(last)
            span = f"{p.low / p.index - 1:+.2%} .. {p.high / p.index - 1:+.2%}"
            print(f"  95% interval at commit {number[last]} {name}: {span}")
        if fitted.note:
            print(f"  note: {fitted.note}")
    first = next(iter(anchored.values()), None)
    if first is not None:
        print(f"\na step is marked when {page.mark_rule(first.step_level, first.min_step)}")
    print("\njob wall times (clone, pairs, history pushes) beside a plain run of the suite:")
    for i, wall, plain, anchor in walls:
        note = "  (anchored)" if anchor else ""
        print(
            f"  commit {i:3d}: job {wall:7.1f} s, plain {plain:7.1f} s, {wall / plain:5.2f}x{note}"
        )
    for name, kept in (
        ("anchored jobs", [w for w in walls if w[3]]),
        ("other jobs", [w for w in walls if not w[3]]),
        ("all jobs", walls),
    ):
        if kept:
            job_s, plain_s = sum(w[1] for w in kept), sum(w[2] for w in kept)
            each = [w[1] / w[2] for w in kept]
            print(
                f"  {name} ({len(kept)}): {job_s:.0f} s, plain runs: {plain_s:.0f} s, "
                f"{job_s / plain_s:.2f}x (each {min(each):.2f}x .. {max(each):.2f}x)"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=30, help="commits after the first (30)")
    parser.add_argument("--fake", action="store_true", help="the fake back end (logic only)")
    parser.add_argument(
        "--noise",
        type=Path,
        metavar="NOISY_NEIGHBOUR_PY",
        help="run each job beside this noisy_neighbour.py, its duty and CPUs changed every job",
    )
    parser.add_argument("--every", type=int, default=5, help="anchor every K jobs (5)")
    parser.add_argument("--slow-at", type=int, default=10, help="commit making alpha slower (10)")
    parser.add_argument("--fast-at", type=int, default=20, help="commit making beta faster (20)")
    parser.add_argument("--keep", type=Path, help="build in this directory and keep it")
    parser.add_argument(
        "--pair-args",
        default="",
        metavar="ARGS",
        help="more pytest arguments for both pairs of every job (e.g. "
        "'--mxperf-pair-budget 10'), to try a setting without editing the workflow",
    )
    args = parser.parse_args(argv)
    if args.noise and not args.noise.exists():
        parser.error(f"--noise: no such file {args.noise}")
    env = {**os.environ, **GIT_ENV}
    if args.fake:
        # The fork servers need no MXNet for the fake, but the rest of what a side imports:
        # with only the package preloaded every side imported pytest's plugins and this plugin's
        # modules again (a fake job's two pairs 6.6 -> 5.1 CPU-s).
        preload = default_preload().split(",")
        env[PRELOAD_ENV] = ",".join(name for name in preload if name != DEFAULT_PRELOAD)
    root = args.keep or Path(tempfile.mkdtemp(prefix="mxperf-history-emulation-"))
    root.mkdir(parents=True, exist_ok=True)
    if args.fake:  # fake runs take no machine-wide device lock a real benchmark waits on
        (root / "tmp").mkdir(exist_ok=True)
        env["TMPDIR"] = str(root / "tmp")
    try:
        origin = setup(root, env, args)
        walls = []
        for i in range(args.commits + 1):
            make_commit(root / "dev", env, i, args)
            if i == 0:
                continue  # the first commit has nothing to pair with: its index is 1.0
            wall, plain, anchor = job(root, origin, env, i, args)
            walls.append((i, wall, plain, anchor))
            note = " anchored" if anchor else ""
            print(f"commit {i}: job {wall:.1f} s (plain {plain:.1f} s){note}", flush=True)
        report(origin, walls, args)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    end_on_sigterm()  # a SIGTERM ends the pytest run it waits on too
    sys.exit(main())
