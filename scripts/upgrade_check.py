"""An MXNet upgrade, judged: baselines stored under mxnet 1.8.0.post0, measured under this
environment's MXNet (1.9.1), same machine, same code.

Builds (once, cached) a venv with mxnet 1.8.0.post0 and this checkout of pytest-mxperf, makes a
scratch repository with one benchmark (a model-zoo network's inference; default squeezenet1.1,
batch 1, 224x224: the case that moved on the machine where the upgrade was first seen), stores
its baseline from the 1.8 venv, then runs, printing each verdict and message:

1. ``pytest --mxperf`` here (arbitration on): the pair in today's environment clears the code,
   so the case must stay regressed, naming the MXNet change;
2. the same with ``--mxperf-arbitrate off``;
3. arbitration with ``--mxperf-env-command``: the baseline side runs under 1.8, and the pair
   (code and software together) must confirm the regression;
4. ``--mxperf-ab A`` with ``--mxperf-env-command``: a paired run across the two environments.

    python scripts/upgrade_check.py [--venv /tmp/mxperf-mx18] [--stores 3]
        [--model squeezenet1.1] [--batch 1] [--size 224]

Which network an upgrade moves depends on the CPU: pick one that the upgrade really slows on
the machine at hand (scenario 4 measures that), or scenarios 2-4 rightly find nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_mxperf.testing.procs import end_on_sigterm
from pytest_mxperf.testing.repos import GIT_ENV

SUITE = """
from mxnet.gluon.model_zoo import vision


def test_upgrade(mxperf):
    net = vision.get_model({model!r})
    mxperf.inference(net, batch_size={batch}, model={model!r}, input_shape=(3, {size}, {size}))
"""
PLUGIN = Path(__file__).resolve().parents[1]
INSTALL = f"{{python}} -m pip install -q -e {PLUGIN} mxnet==1.8.0.post0 numpy<1.24"


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def case_of(repo: Path, python: str, env: dict[str, str], *args: str) -> tuple[Any, float]:
    report = repo.parent / "report.json"
    report.unlink(missing_ok=True)
    start = time.monotonic()
    done = run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--mxperf",
            "--mxperf-json",
            *[str(report), *args],
        ],
        repo,
        env,
    )
    seconds = time.monotonic() - start
    cases = json.loads(report.read_text())["cases"] if report.exists() else []
    if not cases:
        raise SystemExit(f"no case measured:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return cases[0], seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", default=str(Path(tempfile.gettempdir()) / "mxperf-mx18"))
    parser.add_argument("--stores", type=int, default=3)
    parser.add_argument("--model", default="squeezenet1.1", help="a model-zoo network's name")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    args = parser.parse_args()
    if args.batch < 1 or args.size < 32:
        parser.error("--batch must be >= 1 and --size >= 32")
    env = {**os.environ, **GIT_ENV}
    venv = Path(args.venv)
    python18 = venv / "bin" / "python"
    if not python18.exists():
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        cmd = INSTALL.format(python=python18).split()
        subprocess.run(cmd, check=True)
        print(f"built {venv} in {time.monotonic() - start:.0f} s")
    version = run([str(python18), "-c", "import mxnet; print(mxnet.__version__)"], PLUGIN, env)
    print(f"baseline environment: mxnet {version.stdout.strip()}; here: ", end="")
    print(run([sys.executable, "-c", "import mxnet; print(mxnet.__version__)"], PLUGIN, env).stdout)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / "test_suite.py").write_text(
            SUITE.format(model=args.model, batch=args.batch, size=args.size)
        )
        (repo / ".gitignore").write_text("__pycache__/\n")
        for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "A"]):
            run(["git", *cmd], repo, env)
        for i in range(args.stores):
            case, _ = case_of(repo, str(python18), env, "--mxperf-update")
            rate = case["measurement"]["images_per_sec"]
            print(f"stored under 1.8 (run {i + 1}): {rate:.1f} img/s")
        run(["git", "add", "-A"], repo, env)
        run(["git", "commit", "-qm", "baselines stored under mxnet 1.8"], repo, env)
        sha = run(["git", "rev-parse", "HEAD~1"], repo, env).stdout.strip()
        # (title, options, words the message must hold): every scenario must fail the case.
        scenarios = [
            ("1. arbitration on (default)", [], "mxnet: 1.8.0"),
            ("2. arbitration off", ["--mxperf-arbitrate", "off"], "mxnet: 1.8.0"),
            (
                "3. arbitration, baseline side in its own env",
                ["--mxperf-env-command", INSTALL],
                "confirmed by a paired run",
            ),
            (
                "4. paired run across environments",
                ["--mxperf-ab", sha, "--mxperf-env-command", INSTALL],
                "slower",
            ),
        ]
        summary = []
        for title, extra, words in scenarios:
            case, seconds = case_of(repo, sys.executable, env, *extra)
            v = case["verdict"]
            print(f"\n{title}: {v['status']} (failed: {v['failed']}, {seconds:.0f} s)")
            print("  " + v["message"].replace("\n", "\n  "))
            ok = v["failed"] and v["status"] == "regressed" and words in v["message"]
            expected = f"regressed, message naming {words!r}"
            if extra[:2] == ["--mxperf-arbitrate", "off"] and not v["failed"]:
                # Without a pair a drop fails beyond the 20% floor only; within it, the case
                # passes, its verdict naming the change (README, "Verdicts").
                ok = v["status"] == "pass" and words in (v.get("unconfirmed") or "")
                expected = f"within the 20% floor: pass, its verdict naming {words!r}"
            change = "-" if v.get("change") is None else f"{v['change']:+.1%}"
            summary.append(
                f"{title}: {v['status']}, failed {v['failed']}, change {change}, "
                f"{seconds:.0f} s: {'as expected' if ok else 'NOT AS EXPECTED'} ({expected})"
            )
        print(
            f"\nSUMMARY ({args.model} inference bs{args.batch} {args.size}px, baselines stored "
            "under mxnet 1.8.0.post0)"
        )
        for line in summary:
            print("  " + line)
    return 0


if __name__ == "__main__":
    end_on_sigterm()  # a SIGTERM ends the pytest run it waits on too
    sys.exit(main())
