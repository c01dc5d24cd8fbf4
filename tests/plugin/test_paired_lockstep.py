"""Paired runs on the machine: sides pinned to the same CPUs, timing their blocks in turns
(lock-step), the same steps per block, fork servers, and the device locks of a round."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

import pytest

from pytest_mxperf.paired import turns
from pytest_mxperf.system import cpus
from pytest_mxperf.testing.repos import PAIR_SUITE, read_report


def _paired(pytester: pytest.Pytester, rev: str, *args: str) -> pytest.RunResult:
    """``pytest --mxperf --mxperf-ab rev`` with a JSON report, and ``args``."""
    return pytester.runpytest("--mxperf", "--mxperf-ab", rev, "--mxperf-json", "report.json", *args)


def _seen(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variable: str) -> Path:
    """A folder where the suite's spies write what they saw, named to it by ``variable``."""
    seen = pytester.path / "seen"
    seen.mkdir()
    monkeypatch.setenv(variable, str(seen))
    return seen


PINNED_SUITE = """
import os
from pathlib import Path

import pytest
from pytest_mxperf.paired import turns
from pytest_mxperf.testing import FakeModel

def where(label):
    cpus = sorted(os.sched_getaffinity(0))
    out = Path(os.environ["AFFINITY_DIR"]) / f"{{os.getpid()}}.{{label}}"
    out.write_text(",".join(map(str, cpus)))

@pytest.fixture(autouse=True)
def spy(monkeypatch):
    block_done = turns.Baton.next_block

    def next_block(self, rate, wide=False):  # a side's timed block is done, its next turn not asked
        where("timing")
        return block_done(self, rate, wide)

    monkeypatch.setattr(turns.Baton, "next_block", next_block)

def test_where(mxperf):
    where("setup")
    mxperf.inference(FakeModel({speed}), batch_size=8, model="where")
"""


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs a platform that pins and 2 or more CPUs",
)
@pytest.mark.parametrize("setting", ["auto", "first", "first, the environment naming the last"])
def test_both_sides_run_pinned_to_the_same_cpus(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
) -> None:
    usable = sorted(os.sched_getaffinity(0))
    # This machine's choice (tests/unit/system/test_cpus.py: the rule).
    auto = cpus.for_sides("auto")
    chosen = (sorted(auto) if auto else usable) if setting == "auto" else usable[:1]
    flag = "auto" if setting == "auto" else str(usable[0])
    if setting.endswith("last"):
        # The command line wins in the controller; the sides, pinned to the first CPU, must not
        # take the environment's setting (a CPU they cannot run on) and fail.
        monkeypatch.setenv("PYTEST_MXPERF_PAIR_CPUS", str(usable[-1]))
    seen = _seen(fake_pytester, monkeypatch, "AFFINITY_DIR")
    fake_pytester.makepyfile(test_suite=PINNED_SUITE.format(speed=100.0))
    commit("base")
    fake_pytester.makepyfile(test_suite=PINNED_SUITE.format(speed=101.0))
    commit("same speed")
    result = _paired(fake_pytester, "HEAD~1", "--mxperf-pair-cpus", flag)
    result.assert_outcomes(passed=1)
    described = cpus.describe(chosen)
    pinned = setting != "auto" or auto is not None
    header = f"both sides pinned to CPU {described} *" if pinned else "sides not pinned to CPUs"
    result.stdout.fnmatch_lines([f"*paired mode: HEAD~1 vs the working tree, * {header}"])
    assert read_report(fake_pytester.path)["paired"]["cpus"] == (described if pinned else None)
    places: dict[str, dict[str, str]] = {}
    for path in seen.iterdir():
        pid, label = path.name.split(".")
        if pid != str(os.getpid()):  # the controller's own test (it measures nothing)
            places.setdefault(label, {})[pid] = path.read_text()
    assert len(places["setup"]) >= 4  # 2 rounds, 2 sides, each a process of its own
    assert places["timing"].keys() == places["setup"].keys()
    # Both sides time on the same CPUs; their setups, which run at once, on all of them.
    assert set(places["timing"].values()) == {",".join(map(str, chosen))}
    assert set(places["setup"].values()) == {",".join(map(str, usable))}
    assert sorted(os.sched_getaffinity(0)) == usable  # the controller is not pinned


TURNS_SUITE = """
import os
from pathlib import Path

import pytest
from pytest_mxperf.paired import turns
from pytest_mxperf.testing import FakeArray, FakeModel

@pytest.fixture(autouse=True)
def spy(monkeypatch):
    def record(how, key):
        out = Path(os.environ["TURNS_DIR"]) / f"{os.getpid()}.{how}"
        with out.open("a") as f:
            f.write(f"{key}\\n")

    ready, alone = turns.Baton.ready, turns.Baton.alone

    def in_turns(self, nodeid, key, wide=False):
        record("wide" if wide else "ready", key)
        return ready(self, nodeid, key, wide)

    def on_its_own(self, nodeid, key):
        record("alone", key)
        return alone(self, nodeid, key)

    monkeypatch.setattr(turns.Baton, "ready", in_turns)
    monkeypatch.setattr(turns.Baton, "alone", on_its_own)

class Source:
    def __init__(self, backend):
        self.backend = backend

    def __iter__(self):
        for _ in range(6):
            self.backend.now += 0.01
            yield FakeArray((8, 1))

class Listed(list):
    # A list of batches (the fake clock advances as each is fetched): nothing of it runs
    # between fetches.
    def __init__(self, backend):
        super().__init__(FakeArray((8, 1)) for _ in range(6))
        self.backend = backend

    def __iter__(self):
        for batch in super().__iter__():
            self.backend.now += 0.01
            yield batch

def test_model(mxperf):
    mxperf.inference(FakeModel(100.0), batch_size=8, model="net")

def test_loader(mxperf, mxperf_backend):
    mxperf.pipeline(Source(mxperf_backend), model="loader")

def test_listed(mxperf, mxperf_backend):
    mxperf.pipeline(Listed(mxperf_backend), model="listed")
"""


def test_a_pipeline_is_timed_in_a_turn_of_its_own_unless_it_works_only_when_asked(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loader's threads and workers refill their queues whenever it is not timing: block by
    # block in turns, they would work beside the other side's blocks. A list of batches does
    # nothing between fetches: it is timed in turns, on the side's wide CPUs.
    seen = _seen(fake_pytester, monkeypatch, "TURNS_DIR")
    fake_pytester.makepyfile(test_suite=TURNS_SUITE)
    commit("base")
    _paired(fake_pytester, "HEAD").assert_outcomes(passed=3)
    calls: dict[str, list[str]] = {"ready": [], "alone": [], "wide": []}
    for path in seen.iterdir():
        calls[path.name.split(".")[1]] += path.read_text().split()
    assert set(calls["ready"]) == {"net/inference/float32/bs8/cpu"}
    assert set(calls["alone"]) == {"loader/pipeline/float32/bs8/cpu"}
    assert len(calls["alone"]) == 4  # 2 rounds, 2 sides
    assert calls["wide"] == ["listed/pipeline/float32/bs8/cpu"] * 4
    rounds = read_report(fake_pytester.path)["paired"]["rounds"]
    for r in rounds:
        for side in ("rev", "head"):
            blocks = r[side]["blocks"]
            assert blocks["listed/pipeline/float32/bs8/cpu"]["interleaved"] is True
            assert blocks["loader/pipeline/float32/bs8/cpu"]["interleaved"] is False
            # 0.01 s batches: a turn of its own times 0.25 s blocks, a source in turns 0.5 s
            # (its block pairs are its evidence), as a plain run does.
            assert blocks["loader/pipeline/float32/bs8/cpu"]["steps_per_block"] in (24, 25, 26)
            assert blocks["listed/pipeline/float32/bs8/cpu"]["steps_per_block"] in (49, 50, 51)


@pytest.mark.parametrize("lockstep", ["on", "off"])
def test_sides_time_their_blocks_in_turns_unless_told_not_to(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], lockstep: str
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    result = _paired(fake_pytester, "HEAD", "--mxperf-pair-lockstep", lockstep)
    result.assert_outcomes(passed=2)
    rounds = read_report(fake_pytester.path)["paired"]["rounds"]
    assert len(rounds) == 2
    for r in rounds:
        for side in ("rev", "head"):
            blocks = r[side]["blocks"]
            assert set(blocks) == {
                "fast/inference/float32/bs8/cpu",
                "steady/inference/float32/bs8/cpu",
            }
            for case in blocks.values():
                # In turns: the controller's turns.PAIRS block pairs per case, flagged; alone: the
                # side's own count (at least 3).
                assert case["interleaved"] is (lockstep == "on")
                if lockstep == "on":
                    assert len(case["images_per_sec"]) == turns.PAIRS
    assert not list(fake_pytester.path.rglob("turns.sock"))


def test_after_the_first_round_both_sides_time_the_same_steps_per_block(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=200.0))  # HEAD twice as fast
    _paired(fake_pytester, "HEAD").assert_outcomes(passed=2)
    rounds = read_report(fake_pytester.path)["paired"]["rounds"]
    steps = [
        {side: r[side]["blocks"]["fast/inference/float32/bs8/cpu"]["steps_per_block"] for side in r}
        for r in rounds
    ]
    # Each side sized its own 0.1 s blocks in the first round (REV 2 steps of 0.08 s, HEAD 3
    # of 0.04 s); after it, both time the larger count (`pairdata.block_plan`).
    assert steps[0] == {"rev": 2, "head": 3}
    assert steps[1:] == [{"rev": 3, "head": 3}] * (len(rounds) - 1)


SERVERS_SEEN_SUITE = (
    PAIR_SUITE
    + """
import os, sys
from pathlib import Path

def _servers():
    me, found = os.getpid(), 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        found += ppid == me and b"PR_SET_PDEATHSIG" in cmdline  # the fork server's code
    return found

if "--mxperf-side-out" not in sys.argv:  # the controller collecting, not a side
    Path("servers-at-collection.txt").write_text(str(_servers()))
"""
)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_fork_servers_start_while_the_tests_are_collected(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=SERVERS_SEEN_SUITE.format(speed=100.0))
    commit("base")
    _paired(fake_pytester, "HEAD").assert_outcomes(passed=2)
    # Both sides' servers were started at the session's start, before the suite was collected.
    assert (fake_pytester.path / "servers-at-collection.txt").read_text() == "2"


def test_lock_step_sides_meet_under_a_temporary_directory_too_deep_for_a_socket(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Unix socket's path is at most 104-108 bytes; a deep TMPDIR made binding it fail.
    deep = fake_pytester.path / ("tmp" + "-deep" * 20)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    _paired(fake_pytester, "HEAD").assert_outcomes(passed=2)
    for r in read_report(fake_pytester.path)["paired"]["rounds"]:
        assert all(case["interleaved"] for case in r["head"]["blocks"].values())


LOCK_SUITE = """
import fcntl
import os
import tempfile
from pathlib import Path

from pytest_mxperf.testing import FakeModel

def test_lock(mxperf):
    lock = Path(tempfile.gettempdir()) / f"pytest-mxperf-{os.getuid()}" / "cpu.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            state = "free"
            fcntl.flock(fh, fcntl.LOCK_UN)
        except BlockingIOError:
            state = "busy, " + lock.read_text().strip()
    (Path(os.environ["LOCK_SEEN"]) / str(os.getpid())).write_text(state)
    mxperf.inference(FakeModel(100.0), batch_size=8, model="lock")
"""


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="flock device locks need a POSIX system")
@pytest.mark.parametrize("lockstep", ["on", "off"])
def test_the_controller_holds_the_device_lock_for_a_lock_step_round(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    lockstep: str,
) -> None:
    # Lock-step sides take no device lock (they take turns with each other), so another run
    # is kept off the machine by the controller's locks, held while both sides are alive;
    # sides one after the other each take the lock for their own measurement.
    seen = _seen(fake_pytester, monkeypatch, "LOCK_SEEN")
    fake_pytester.makepyfile(test_suite=LOCK_SUITE)
    commit("base")
    _paired(fake_pytester, "HEAD", "--mxperf-pair-lockstep", lockstep).assert_outcomes(passed=1)
    sides = {p.read_text() for p in seen.iterdir() if p.name != str(os.getpid())}
    assert sides == ({f"busy, pid {os.getpid()}"} if lockstep == "on" else {"free"})
