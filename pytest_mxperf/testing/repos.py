"""Git repositories for tests and scripts that need a commit history: git with a fixed identity
(`git`, `GIT_ENV`), suites to commit into one (`PAIR_SUITE`, `SPEEDS_SUITE` and `SLOW_SUITE` on
the fake back end, `REAL_SUITE` on MXNet), and what tests do to such a repository
(`commit_two`, `write_speeds`, `store_speeds`, `stored_files`, `spoil_baseline`,
`inflate_baselines`, `worktrees`, `read_report`, `stored_keys`)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

#: A fixed identity, so tests and scripts commit anywhere (no global git config needed).
GIT_ENV = {
    "GIT_AUTHOR_NAME": "mxperf test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "mxperf test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(path: Path, *args: str) -> str:
    """Run git in ``path`` with a fixed identity; return stdout."""
    env = {**os.environ, **GIT_ENV}
    for name in ("GITHUB_SHA", "CI_COMMIT_SHA", "PYTEST_MXPERF_COMMIT", "GIT_COMMIT"):
        env.pop(name, None)
    done = subprocess.run(
        ["git", *args], cwd=path, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commits(path: Path, subjects: Sequence[str]) -> list[str]:
    """One commit per subject in the repository ``path`` (``f.txt`` changed by each); their
    shas, oldest first."""
    shas = []
    for n, subject in enumerate(subjects):
        (path / "f.txt").write_text(f"{n}\n")
        git(path, "add", "-A")
        git(path, "commit", "-qm", subject)
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


def head_speeds(speeds: Sequence[float], counter: Path, head: Path) -> str:
    """The start of a fake-back-end suite whose speed differs by side: ``SPEED`` is 100 img/s in
    REV's tree; in HEAD's (``head``) each process that imports the file (the controller's
    collection included) takes the next of ``speeds`` in turn, counted in the file ``counter``.
    ``IS_HEAD`` says which tree the file is in."""
    return f"""
import pathlib
from pytest_mxperf.testing import FakeModel

HERE = pathlib.Path(__file__).resolve().parent
COUNTER = pathlib.Path({str(counter)!r})
IS_HEAD = HERE == pathlib.Path({str(head)!r}).resolve()
if IS_HEAD:
    n = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(n + 1))
    SPEED = {tuple(speeds)!r}[n % {len(speeds)}]
else:
    SPEED = 100.0
"""


def worktrees(path: Path) -> list[str]:
    """The lines of ``git worktree list`` in ``path`` (1: no paired run's worktree is left)."""
    return [line for line in git(path, "worktree", "list").splitlines() if line.strip()]


def inflate_baselines(
    path: Path, factor: float, machine: str | None = None, calibration: bool = False
) -> None:
    """Scale every stored figure under ``path/baselines`` by ``factor``, as if the baselines had
    been stored on a faster machine (with the anonymous id ``machine``, when given); with
    ``calibration`` the files' calibration probe figures too (the machine ran it faster)."""
    for file in (path / "baselines").rglob("*.json"):
        data = json.loads(file.read_text())
        for case in data["cases"].values():
            case["images_per_sec"] *= factor
            case["runs"] = [r * factor for r in case["runs"]]
            if machine is not None:
                case["machine_ids"] = [machine] * len(case["runs"])
        probe = data.get("calibration")
        if calibration and probe is not None:
            probe["runs"] = [r * factor for r in probe["runs"]]
            probe["images_per_sec"] *= factor
        file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_report(path: Path, name: str = "report.json") -> dict[str, Any]:
    """The JSON report ``path/name`` a run wrote (``--mxperf-json``)."""
    data: dict[str, Any] = json.loads((path / name).read_text())
    return data


def cases_by_key(path: Path, name: str = "report.json") -> dict[str, Any]:
    """The cases of the JSON report ``path/name``, by case key."""
    return {c["key"]: c for c in read_report(path, name)["cases"]}


#: A fake-back-end suite whose speeds are data: one case per ``model=img/s`` pair of the
#: ``speed.txt`` beside it (`write_speeds`), so a commit can change one model's speed alone.
SPEEDS_SUITE = """
import pathlib
import pytest
from pytest_mxperf.testing import FakeModel

SPEED = {k: float(v) for k, v in (
    line.split("=") for line in pathlib.Path(__file__).with_name("speed.txt").read_text().split()
)}

@pytest.mark.parametrize("model", sorted(SPEED))
def test_model(mxperf, model):
    mxperf.inference(FakeModel(images_per_sec=SPEED[model]), batch_size=8, model=model)
"""


def write_speeds(path: Path, **speeds: float) -> None:
    """The ``speed.txt`` of `SPEEDS_SUITE` in ``path``: ``write_speeds(path, alpha=400)``."""
    (path / "speed.txt").write_text(" ".join(f"{k}={v}" for k, v in speeds.items()))


def stored_files(path: Path) -> list[Path]:
    """The baseline files under ``path/baselines``, sorted."""
    return sorted((path / "baselines").glob("*/*.json"))


def stored_keys(path: Path) -> set[str]:
    """The case keys the baseline files under ``path/baselines`` hold, across every file."""
    return {key for file in stored_files(path) for key in json.loads(file.read_text())["cases"]}


def store_speeds(pytester: pytest.Pytester, **speeds: float) -> None:
    """Commit `SPEEDS_SUITE` at ``speeds`` and then its baselines, stored by
    ``pytest --mxperf --mxperf-update`` at the first commit (HEAD~1 afterwards)."""
    write_speeds(pytester.path, **speeds)
    git(pytester.path, "commit", "-q", "--allow-empty", "-am", "speeds")
    pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=len(speeds))
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "store baseline")


def spoil_baseline(path: Path, field: str, value: object) -> str:
    """Give the first case of the baseline file ``path`` a wrongly typed field; -> its text."""
    data = json.loads(path.read_text())
    first = sorted(data["cases"])[0]
    data["cases"][first][field] = value
    text = json.dumps(data)
    path.write_text(text)
    return text


#: A fake-back-end suite of two cases for paired runs and arbitration: ``fast`` at ``{speed}``
#: img/s (``PAIR_SUITE.format(speed=80.0)`` makes it slower) and ``steady`` at 50 img/s.
PAIR_SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

SPEED = {speed}

def test_fast(mxperf):
    mxperf.inference(FakeModel(SPEED), batch_size=8, model="fast")

def test_steady(mxperf):
    mxperf.inference(FakeModel(50.0), batch_size=8, model="steady")
"""


#: A fake-back-end suite of one case whose calls take real time (50 ms of sleep each), so that
#: a paired run can be signalled while a side runs.
SLOW_SUITE = """
import time

def test_slow(mxperf):
    mxperf.callable(lambda: time.sleep(0.05), items_per_call=1, model="slow")
"""


def commit_two(pytester: pytest.Pytester, suite: str) -> None:
    """Two commits of ``suite`` as the pytester directory's ``test_suite.py``, "A" and then "B"
    (a comment added: the file differs), in a repository made by the ``commit`` fixture."""
    for message, text in (("A", suite), ("B", suite + "\n# B\n")):
        pytester.makepyfile(test_suite=text)
        git(pytester.path, "add", "-A")
        git(pytester.path, "commit", "-q", "-m", message)


#: A real-MXNet benchmark suite for regression tests and scripts/aa_check.py: a tiny model-zoo
#: net in two cases. `steady` never changes. `target` runs the same net through a plain callable
#: whose work per batch can be raised by construction: MXPERF_EXTRA_WORK=0.4 (or 0.4 in a
#: committed extra_work.txt) adds 0.4 forward passes per batch on average (40% more work).
REAL_SUITE = """
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

MODEL = os.environ.get("MXPERF_TEST_MODEL", "resnet18_v1")
SIZE = int(os.environ.get("MXPERF_TEST_SIZE", "32"))
BATCH = int(os.environ.get("MXPERF_TEST_BATCH", "10"))


def build():
    # The net is part of the code too: a committed model.txt names it (convs21: one Conv2D more
    # than convs20), the case's label staying MXPERF_TEST_MODEL's.
    committed = Path(__file__).with_name("model.txt")
    name = committed.read_text().strip() if committed.exists() else MODEL
    if name.startswith("convs"):  # "convs20": 20 Conv2D of 32 channels (a user's net)
        from mxnet.gluon import nn

        net = nn.HybridSequential()
        for _ in range(int(name[len("convs"):] or 20)):
            net.add(nn.Conv2D(32, 3, padding=1, activation="relu"))
        net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
        return net
    from mxnet.gluon.model_zoo import vision

    return vision.get_model(name, classes=10)


@pytest.mark.parametrize("which", ["target", "steady"])
def test_infer(mxperf, which):
    shape = (3, SIZE, SIZE)
    label = f"{MODEL}-{which}"
    if which == "steady":
        mxperf.inference(build(), batch_size=BATCH, input_shape=shape, model=label)
        return
    import mxnet as mx

    net = build()
    net.initialize(mx.init.Xavier(magnitude=2))
    net.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.random.uniform(-1, 1, shape=(BATCH, *shape))
    # The work is part of the code: a committed file (paired runs compare commits) or the
    # environment; 0.25 = one more forward pass every 4 batches, spread evenly.
    committed = Path(__file__).with_name("extra_work.txt")
    extra = float(
        os.environ.get("MXPERF_EXTRA_WORK")
        or (committed.read_text() if committed.exists() else "0")
    )
    owed = [0.0]

    def step():
        out = net(x)
        owed[0] += extra
        while owed[0] >= 1.0:
            out = net(x)
            owed[0] -= 1.0
        return out

    mxperf.callable(step, items_per_call=BATCH, model=label)
"""
