"""What the main job costs when its stored figures are not this machine's: where the rounds go.

Runs this repository's main job (``pytest --mxperf tests/perf``) from a fresh clone of HEAD, as
a new runner would, beside a plain run of the same selection with no stored baseline, and
prints the walls, their ratio, the verdicts, and per case the pairs' rounds and seconds and what
decided it. The stored figures are the committed ones, changed as the scenario says (in a
copy: the clone's files are not touched):

- ``new-host``: as if stored on another machine: each case's figures raised by a factor drawn
  from 1/0.82 .. 1/0.45 (seeded), the calibration probe's by 1/0.74 (what round 4 measured on
  another VM of the same hardware key); the committed commits stay (code changed since).
- ``slow-hour``: the same machine on a slower hour: the suite stored here first
  (``--stores`` runs of ``--mxperf-update`` at HEAD, into the copy, one after the other: three
  by default, as the docs advise for a machine that stores its own baselines; 1 stores once),
  a code commit on top (a comment), then every
  stored figure raised so that each case measures 2-4% below it (within its threshold), and the
  calibration probe's so that it runs 3% below its own (the machine is slower that hour).
  ``--loss`` adds a commit making resnet18_v1 inference at batch 8 about 10% slower (one more
  forward of one image of its batch) and runs the main job again: it must fail that case.

    python scripts/host_cost.py --scenario new-host [--seed 1] [--keep DIR] [-- PYTEST_ARGS]

One benchmark at a time: nothing else may measure on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

from pytest_mxperf.testing.procs import end_on_sigterm

ROOT = Path(__file__).resolve().parent.parent
SUITE = "tests/perf"
#: Round 4 on another VM of the same key: cases at 0.45x .. 0.82x, the probe at 0.74x.
HOST_RANGE = (0.45, 0.82)
HOST_PROBE = 0.74
#: A slower hour: each case this much below its stored figure.
HOUR_RANGE = (0.02, 0.04)
SCALED = ("images_per_sec", "last_images_per_sec", "iqr")
LISTS = ("runs", "block_images_per_sec")

LOSS_PATCH = '''

def _with_loss(net: Any) -> Any:
    """resnet18_v1 with one more forward of one image per batch (about 1/8 more work at 8)."""
    from mxnet.gluon import HybridBlock

    class Slower(HybridBlock):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def hybrid_forward(self, F: Any, x: Any) -> Any:
            out = self.net(x)
            extra = self.net(F.slice_axis(x, axis=0, begin=0, end=1))
            return F.broadcast_add(out, F.mean(extra) * 0)

    return Slower()
'''


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, float, str]:
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return done.returncode, time.monotonic() - start, done.stdout + done.stderr


def git(repo: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def scale_files(stored: Path, factor: Callable[[str], float], probe: float | None) -> None:
    """Every case's figures in the files under ``stored`` times ``factor(key)``; the probe's
    times ``probe`` (None: left)."""
    for file in stored.rglob("*.json"):
        data = json.loads(file.read_text(encoding="utf-8"))
        for key, case in data.get("cases", {}).items():
            f = factor(key)
            for name in SCALED:
                if isinstance(case.get(name), (int, float)):
                    case[name] *= f
            for name in LISTS:
                if isinstance(case.get(name), list):
                    case[name] = [x * f for x in case[name]]
        cal = data.get("calibration")
        if probe is not None and isinstance(cal, dict):
            cal["images_per_sec"] *= probe
            cal["runs"] = [x * probe for x in cal.get("runs", [])]
        file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main_job(
    clone: Path, env: dict[str, str], base_dir: Path, report: Path, extra: list[str]
) -> tuple[int, float, dict[str, Any]]:
    cmd = [sys.executable, "-m", "pytest", "--mxperf", SUITE, "-p", "no:cacheprovider"]
    cmd += ["--mxperf-baseline-dir", str(base_dir), "--mxperf-json", str(report), *extra]
    code, seconds, out = run(cmd, clone, env)
    if not report.exists():
        raise SystemExit(f"no report (exit {code}):\n{out[-3000:]}")
    return code, seconds, json.loads(report.read_text(encoding="utf-8"))


def where_time_went(report: dict[str, Any]) -> list[str]:
    """Per case: status, change, the pairs' rounds and seconds (both sides), what decided it;
    then each pair's round walls."""
    rounds: Counter[str] = Counter()
    seconds: defaultdict[str, float] = defaultdict(float)
    lines = []
    for pair in report.get("pair_runs", []):
        walls = ", ".join(f"{x:.0f}" for x in pair.get("round_seconds", []))
        cases = {k for r in pair["rounds"] for k in r["head"]["images_per_sec"]}
        lines.append(
            f"  pair with {pair['rev_sha'][:10]}: {len(cases)} cases, round walls [{walls}] s"
            f"{', budget spent' if pair.get('budget_spent') else ''}"
        )
        for rnd in pair["rounds"]:
            for side in ("rev", "head"):
                for key, held in rnd[side]["seconds"].items():
                    seconds[key] += held or 0.0
            for key in rnd["head"]["images_per_sec"]:
                rounds[key] += 1
    table = []
    for case in sorted(report["cases"], key=lambda c: -seconds[str(c["key"])]):
        key = str(case["key"])
        v = case.get("verdict") or {}
        change = v.get("change")
        said = (v.get("message") or "").split("\n")[0][:110]
        table.append(
            f"  {key:48} {v.get('status', '-'):13} "
            f"{'' if change is None else f'{change:+.1%}':>7} rounds {rounds[key]:2} "
            f"{seconds[key]:6.1f} s  {said}"
        )
    return table + lines


def summary(name: str, code: int, seconds: float, report: dict[str, Any]) -> str:
    statuses = Counter((c.get("verdict") or {}).get("status", "-") for c in report["cases"])
    said = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    return f"{name}: exit {code}, {seconds:.0f} s, {said}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=("new-host", "slow-hour"), default="new-host")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--loss", action="store_true", help="slow-hour: also a real loss")
    parser.add_argument("--keep", type=Path, help="work here (kept) instead of a temp dir")
    parser.add_argument("--stores", type=int, default=3, help="slow-hour: update runs (3)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GIT_"))}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        clone = work / "clone"
        shutil.rmtree(clone, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env["PYTHONPATH"] = str(clone)
        for name in ("user.name", "user.email"):
            git(clone, env, "config", name, "host-cost")
        stored, empty = work / "stored", work / "empty"
        shutil.rmtree(stored, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)
        empty.mkdir()
        if args.scenario == "new-host":
            shutil.copytree(clone / "baselines", stored)
            factors: dict[str, float] = {}
            scale_files(
                stored,
                lambda k: 1 / factors.setdefault(k, rng.uniform(*HOST_RANGE)),
                1 / HOST_PROBE,
            )
        else:
            stored.mkdir()
            for i in range(args.stores):
                code, secs, _ = main_job(
                    clone,
                    env,
                    stored,
                    work / f"store{i}.json",
                    ["--mxperf-update", *args.pytest_args],
                )
                print(
                    f"stored at HEAD ({i + 1} of {args.stores}): exit {code}, {secs:.0f} s",
                    flush=True,
                )
            models = clone / SUITE / "models.py"
            models.write_text(models.read_text() + "\n# a code change since the baselines\n")
            git(clone, env, "commit", "-qam", "a code change since the baselines")
            # The probe runs slower that hour too: by the middle of the cases' range.
            scale_files(
                stored, lambda k: 1 / (1 - rng.uniform(*HOUR_RANGE)), 1 / (1 - sum(HOUR_RANGE) / 2)
            )
        code, host_s, host = main_job(clone, env, stored, work / "host.json", args.pytest_args)
        print(summary(f"main job ({args.scenario})", code, host_s, host), flush=True)
        print("\n".join(where_time_went(host)), flush=True)
        code, plain_s, plain = main_job(clone, env, empty, work / "plain.json", args.pytest_args)
        print(summary("plain run, no stored baseline", code, plain_s, plain), flush=True)
        print(f"RATIO {host_s / plain_s:.2f}x ({host_s:.0f} s / {plain_s:.0f} s)", flush=True)
        if args.loss and args.scenario == "slow-hour":
            models = clone / SUITE / "models.py"
            text = models.read_text().replace(
                "    return vision.get_model(model, classes=1000)\n",
                "    net = vision.get_model(model, classes=1000)\n"
                '    return _with_loss(net) if model == "resnet18_v1" and LOSS else net\n',
            )
            models.write_text(text + LOSS_PATCH + "\n\nLOSS = True\n")
            git(clone, env, "commit", "-qam", "resnet18_v1: one more image per batch")
            code, secs, lost = main_job(
                clone, env, stored, work / "loss.json", ["-k", "resnet18_v1", *args.pytest_args]
            )
            print(summary("with a loss (resnet18_v1 cases)", code, secs, lost), flush=True)
            print("\n".join(where_time_went(lost)), flush=True)
    return 0


if __name__ == "__main__":
    end_on_sigterm()  # a SIGTERM ends the pytest run it waits on too
    raise SystemExit(main())
