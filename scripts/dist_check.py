"""Launch one dist_sync case N times in a row through the plugin's launcher and count outcomes.

Each launch is one job of the local launcher (`pytest_mxperf.distributed.launch.launch`): a
scheduler, ``--servers`` servers and ``--workers`` workers on 127.0.0.1, each worker training
the model with short measuring times. A launch that a rank ends (an abort inside MXNet or
ps-lite, a timeout) counts as failed with the line of the rank's output that says why. The
launcher starts no launch again, so ``relaunched`` counts launches whose result carries a
relaunch note (none since the relaunch was removed; kept so the goal "no relaunch" is printed
rather than assumed).

    python scripts/dist_check.py        # resnet18_v1, 3x32x32, 4 per worker, 20 launches
    python scripts/dist_check.py --model mxnet.gluon.model_zoo.vision:resnet50_v1 \
        --runs 3 --servers 2
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_mxperf.distributed.launch import LaunchError, RankFailed, launch
from pytest_mxperf.measuring.dp_scaling import DataParallelSpec
from pytest_mxperf.measuring.measure import MeasureConfig

SHORT = MeasureConfig(
    min_time=0.3,
    max_time=1.0,
    warmup_time=0.5,
    warmup_min_time=0.1,
    block_time=0.1,
    min_blocks=3,
    max_blocks=10,
)


def why(text: str) -> str:
    """The line of a rank's output that names the failure."""
    for line in text.splitlines():
        if "Check failed" in line or "Error" in line:
            return line.strip()[:200]
    return (text.strip().splitlines() or ["(no output)"])[-1][:200]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mxnet.gluon.model_zoo.vision:resnet18_v1")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--batch", type=int, default=4, help="images per worker")
    parser.add_argument("--input", default="3,32,32", help="C,H,W")
    parser.add_argument("--classes", type=int, default=None, help="num_classes of the spec")
    parser.add_argument("--kvstore", default="dist_sync")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per launch")
    args = parser.parse_args(argv)
    spec = DataParallelSpec(
        factory=args.model,
        batch_per_device=args.batch,
        input_shape=tuple(int(x) for x in args.input.split(",")),
        kvstore=args.kvstore,
        workers=args.workers,
        servers=args.servers,
        num_classes=args.classes,
        timeout=args.timeout,
        measure=SHORT,
    )
    counts: Counter[str] = Counter()
    for i in range(1, args.runs + 1):
        started = time.monotonic()
        try:
            reports = launch(spec)
        except RankFailed as exc:
            counts["failed"] += 1
            print(f"{i:3d} FAILED {exc.rank.name}: {why(exc.tail)}", flush=True)
            continue
        except LaunchError as exc:
            counts["failed"] += 1
            print(f"{i:3d} FAILED {why(str(exc))}", flush=True)
            continue
        counts["succeeded"] += 1
        rates = ", ".join(f"{r.images_per_sec:.1f}" for r in reports)
        print(f"{i:3d} ok in {time.monotonic() - started:.1f} s (img/s per worker: {rates})")
    print(
        f"{args.model} {args.kvstore} {args.workers} workers {args.servers} servers "
        f"batch {args.batch} input {args.input}: {args.runs} launches, "
        f"{counts['succeeded']} succeeded, {counts['failed']} failed, "
        f"{counts['relaunched']} relaunched",
        flush=True,
    )
    return 0 if counts["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
