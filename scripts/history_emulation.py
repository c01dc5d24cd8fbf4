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
    [ -n "$ANCHOR" ] && pytest --mxperf --mxperf-ab "$ANCHOR" --mxperf-rounds 5 $ONLY_RATIO \
        --mxperf-json anchor.json
    mxperf history add pair.json                   # pushed to origin's mxperf-history
    [ -f anchor.json ] && mxperf history add anchor.json

and, for the cost, a plain run of the same suite (``pytest --mxperf``) in the same clone.

With ``--prs`` every commit after the first arrives as a pull request, as the example's
workflows see it: its PR job (a fresh clone, its own load) pairs GitHub's test merge commit (the
PR merged into main) with main, as mxperf-pr.yml does; the PR is then squash-merged, and the
main-branch job adopts that pair when it measured the merged commit's tree against the chain's
base (``mxperf history adopt``), pairing itself only when it did not (and for its anchor).

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
import contextlib
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from pytest_mxperf.cli.history_commands import NOT_ADOPTED
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

#: The anchor pair's first rounds, as the example's main workflow runs it (its precision is
#: what bounds the index; a verdict in 3 rounds leaves a t quantile of 2 df).
ANCHOR_ROUNDS = ("--mxperf-rounds", "5")

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


def adopt_status(cwd: Path, env: dict[str, str], *args: str) -> int:
    """``mxperf history adopt``'s exit status: 0 or 1 (adoptable; 1: that pair judged a case
    regressed) or 3 (not adopted); anything else ends the emulation."""
    argv = [sys.executable, "-m", "pytest_mxperf.cli.commands", *args]
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 1, NOT_ADOPTED):
        raise SystemExit(f"{' '.join(argv)} failed in {cwd}:\n{done.stdout}\n{done.stderr}")
    return done.returncode


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


def make_commit(
    dev: Path, env: dict[str, str], i: int, args: argparse.Namespace, branch: str = "main"
) -> None:
    """Commit ``i`` pushed to ``branch`` (a PR's branch off main: checked out from main)."""
    if branch != "main":
        run(dev, env, "git", "checkout", "-q", "-B", branch, "main")
    (dev / "work.txt").write_text(" ".join(f"{k}={v}" for k, v in work_at(i, args).items()))
    (dev / "notes.txt").write_text(f"commit {i}\n")
    what = {args.slow_at: ": alpha 8% slower", args.fast_at: ": beta 5% faster"}.get(i, "")
    run(dev, env, "git", "add", "-A")
    run(dev, env, "git", "commit", "-qm", f"commit {i}{what}")
    run(dev, env, "git", "push", "-q", "origin", f"HEAD:{branch}")


def squash_merge(dev: Path, env: dict[str, str], branch: str) -> None:
    """The PR merged as one new commit on main (the PR's tree when main has not moved)."""
    run(dev, env, "git", "checkout", "-q", "main")
    run(dev, env, "git", "merge", "-q", "--squash", branch)
    subject = run(dev, env, "git", "log", "-1", "--format=%s", branch)
    run(dev, env, "git", "commit", "-qm", f"{subject} (#{branch})")
    run(dev, env, "git", "push", "-q", "origin", "HEAD:main")


@contextlib.contextmanager
def neighbour(args: argparse.Namespace, seed: int) -> Iterator[None]:
    """The noisy neighbour under one job, its duty and CPUs drawn from ``seed`` (none without
    ``--noise``)."""
    if not args.noise:
        yield
        return
    duty = random.Random(seed).uniform(0.1, 0.6)
    cpus = ("0", "1", "0,1")[seed % 3]
    argv = [sys.executable, str(args.noise), "--seconds", "3600", "--duty", f"{duty:.2f}"]
    argv += ["--cpus", cpus, "--seed", str(seed)]
    noise = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        noise.terminate()
        noise.wait(timeout=30)


def pr_job(
    root: Path, origin: Path, env: dict[str, str], i: int, branch: str
) -> tuple[float, Path | None]:
    """The PR job of ``branch`` on a fresh clone, as mxperf-pr.yml runs it: its test merge commit
    paired with main (the PR workflow's own settings). (its wall, its report kept as the
    artifact the main job downloads, or None when the run left none)."""
    clone = root / f"pr-{i}"
    try:
        start = time.monotonic()
        run(root, env, "git", "clone", "-q", str(origin), str(clone))
        run(clone, env, "git", "checkout", "-q", "--detach", "origin/main")
        run(
            clone, env, "git", "merge", "-q", "--no-ff", "-m", f"Merge {branch}", f"origin/{branch}"
        )
        pytest(clone, env, "--mxperf", "--mxperf-ab", "origin/main", "--mxperf-json", "pr.json")
        wall = time.monotonic() - start
        artifact = root / "artifacts" / f"{branch}.json"
        artifact.parent.mkdir(exist_ok=True)
        if not (clone / "pr.json").exists():
            return wall, None
        shutil.copy(clone / "pr.json", artifact)
        return wall, artifact
    finally:
        shutil.rmtree(clone, ignore_errors=True)


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
    root: Path,
    origin: Path,
    env: dict[str, str],
    i: int,
    args: argparse.Namespace,
    artifact: Path | None = None,
) -> tuple[float, float, bool, bool]:
    """Commit ``i``'s main-branch job on a fresh clone, adopting the PR job's ``artifact`` when
    it measured this commit: (job's wall, plain run's wall, anchored, adopted)."""
    clone = root / f"job-{i}"
    try:
        start = time.monotonic()
        run(root, env, "git", "clone", "-q", str(origin), str(clone))
        more = [*ONLY_RATIO, *shlex.split(args.pair_args)]
        adopt = ["history", "adopt", str(artifact)] if artifact else []
        # Exit 0 or 1 (adoptable; 1: that pair judged a case regressed), 3 not adopted; the
        # check reads the clone's copy of the branch, the adoption fetches it (as the workflow).
        check = [*adopt, "--check", "--no-fetch"]
        adopted = bool(adopt) and adopt_status(clone, env, *check) != NOT_ADOPTED
        if not adopted:
            base = mxperf(clone, env, "history", "base", "--no-fetch")
            argv = ["--mxperf-ab", base, *more, "--mxperf-json", "pair.json"]
            pytest(clone, env, "--mxperf", *argv)
        anchor = mxperf(clone, env, "history", "anchor", "--no-fetch", "--every", str(args.every))
        if anchor:
            argv = ["--mxperf-ab", anchor, *ANCHOR_ROUNDS, *more, "--mxperf-json", "anchor.json"]
            pytest(clone, env, "--mxperf", *argv)
        if adopted:
            if adopt_status(clone, env, *adopt) == NOT_ADOPTED:
                raise SystemExit(f"commit {i}: adoptable a moment ago, then not adopted")
        else:
            mxperf(clone, env, "history", "add", "pair.json")
        if anchor and (clone / "anchor.json").exists():
            mxperf(clone, env, "history", "add", "anchor.json")
        wall = time.monotonic() - start
        plain = pytest(clone, env, "--mxperf")
    finally:
        shutil.rmtree(clone, ignore_errors=True)
    return wall, plain, bool(anchor), adopted


class Job(NamedTuple):
    """One commit's main-branch job: its wall and its plain run's; with ``--prs`` its PR job's."""

    i: int
    wall: float
    plain: float
    anchored: bool
    adopted: bool
    pr: float | None


def report(origin: Path, walls: list[Job], args: argparse.Namespace) -> None:
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
    for w in walls:
        note = "  (anchored)" if w.anchored else ""
        note += "  (adopted the PR's pair)" if w.adopted else ""
        pr = "" if w.pr is None else f"; its PR job {w.pr:6.1f} s, {w.pr / w.plain:5.2f}x"
        print(
            f"  commit {w.i:3d}: job {w.wall:7.1f} s, plain {w.plain:7.1f} s, "
            f"{w.wall / w.plain:5.2f}x{note}{pr}"
        )
    groups = [
        ("anchored jobs", [w for w in walls if w.anchored]),
        ("other jobs", [w for w in walls if not w.anchored]),
        ("jobs that adopted the PR's pair", [w for w in walls if w.adopted]),
        ("all jobs", walls),
    ]
    for name, kept in groups:
        if kept:
            job_s, plain_s = sum(w.wall for w in kept), sum(w.plain for w in kept)
            each = [w.wall / w.plain for w in kept]
            print(
                f"  {name} ({len(kept)}): {job_s:.0f} s, plain runs: {plain_s:.0f} s, "
                f"{job_s / plain_s:.2f}x (each {min(each):.2f}x .. {max(each):.2f}x)"
            )
    prs = [w for w in walls if w.pr is not None]
    if prs:
        pr_s, plain_s = sum(w.pr or 0.0 for w in prs), sum(w.plain for w in prs)
        print(
            f"  PR jobs ({len(prs)}, each paid to gate its merge): {pr_s:.0f} s, "
            f"{pr_s / plain_s:.2f}x the plain runs; PR and main jobs together "
            f"{(pr_s + sum(w.wall for w in prs)) / plain_s:.2f}x"
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
        "--prs",
        action="store_true",
        help="every commit as a pull request: its PR job pairs it, the main job adopts that pair",
    )
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
            pr_wall, artifact = None, None
            if args.prs and i > 0:
                branch = f"pr-{i}"
                make_commit(root / "dev", env, i, args, branch)
                with neighbour(args, 1000 + i):  # another load than its main job's
                    pr_wall, artifact = pr_job(root, origin, env, i, branch)
                squash_merge(root / "dev", env, branch)
            else:
                make_commit(root / "dev", env, i, args)
            if i == 0:
                continue  # the first commit has nothing to pair with: its index is 1.0
            with neighbour(args, i):
                wall, plain, anchor, adopted = job(root, origin, env, i, args, artifact)
            walls.append(Job(i, wall, plain, anchor, adopted, pr_wall))
            note = (" anchored" if anchor else "") + (" adopted" if adopted else "")
            pr = "" if pr_wall is None else f", PR job {pr_wall:.1f} s"
            print(f"commit {i}: job {wall:.1f} s (plain {plain:.1f} s{pr}){note}", flush=True)
        report(origin, walls, args)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    end_on_sigterm()  # a SIGTERM ends the pytest run it waits on too
    sys.exit(main())
