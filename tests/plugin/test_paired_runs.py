"""Paired runs: the side processes, the controller's rounds and arbitration of stored baselines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_mxperf.paired import turns
from pytest_mxperf.system import cpus
from pytest_mxperf.testing.repos import git


def _report(pytester: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data


SIDE_SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("batch", [1, 8])
def test_toy(mxperf, batch):
    mxperf.inference(FakeModel(100.0 * batch), batch_size=batch, model="toy")

def test_other(mxperf):
    mxperf.inference(FakeModel(5.0), batch_size=1, model="other")
"""


def test_side_process_measures_the_selected_cases_once(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(test_suite=SIDE_SUITE, test_broken="import no_such_module\n")
    (fake_pytester.path / "select.txt").write_text(
        "test_suite.py::test_toy[8]\ntest_suite.py::test_other\ntest_suite.py::test_gone\n"
    )
    result = fake_pytester.runpytest(
        "--continue-on-collection-errors",
        "--mxperf-side-out",
        "side.json",
        "--mxperf-side-select",
        "select.txt",
        # A side never arbitrates, updates or re-measures, whatever else it is told.
        "--mxperf-update",
        "--mxperf-confirm",
        "5",
    )
    result.assert_outcomes(passed=2, deselected=1, errors=1)
    side = json.loads((fake_pytester.path / "side.json").read_text())
    cases = {c["key"]: c for c in side["cases"]}
    assert set(cases) == {"toy/inference/float32/bs8/cpu", "other/inference/float32/bs1/cpu"}
    assert all(len(c["attempts"]) == 1 for c in cases.values())
    assert cases["toy/inference/float32/bs8/cpu"]["measurement"]["images_per_sec"] == (
        pytest.approx(800.0)
    )
    ((nodeid, text),) = side["collect_errors"]
    assert nodeid == "test_broken.py" and "no_such_module" in text
    assert not (fake_pytester.path / "baselines").exists()  # --mxperf-update was ignored


@pytest.mark.parametrize("planned", [True, False])
def test_side_process_times_the_blocks_a_plan_gives(
    fake_pytester: pytest.Pytester, planned: bool
) -> None:
    fake_pytester.makepyfile(test_suite=SIDE_SUITE)
    (fake_pytester.path / "select.txt").write_text(
        "test_suite.py::test_toy[1]\ntest_suite.py::test_toy[8]\n"
    )
    plan = {"toy/inference/float32/bs8/cpu": 3} if planned else {}
    (fake_pytester.path / "plan.json").write_text(json.dumps(plan))
    result = fake_pytester.runpytest(
        "--mxperf-side-out",
        "side.json",
        "--mxperf-side-select",
        "select.txt",
        "--mxperf-side-plan",
        "plan.json",
    )
    result.assert_outcomes(passed=2)
    side = json.loads((fake_pytester.path / "side.json").read_text())
    steps = {c["key"]: c["measurement"]["steps_per_block"] for c in side["cases"]}
    # Unplanned cases size their own 0.1 s blocks of 0.01 s steps (10, or 11 by float rounding).
    assert steps["toy/inference/float32/bs1/cpu"] in (10, 11)
    bs8 = steps["toy/inference/float32/bs8/cpu"]
    assert bs8 == 3 if planned else bs8 in (10, 11)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read the paired run's block plan"),
        ("[3]", "is not a mapping of case keys to steps >= 1"),
        ('{"toy/inference/float32/bs8/cpu": 0}', "is not a mapping of case keys to steps >= 1"),
    ],
)
def test_side_process_refuses_a_bad_plan(
    fake_pytester: pytest.Pytester, content: str | None, problem: str
) -> None:
    fake_pytester.makepyfile(test_suite=SIDE_SUITE)
    if content is not None:
        (fake_pytester.path / "plan.json").write_text(content)
    result = fake_pytester.runpytest(
        "--mxperf-side-out", "side.json", "--mxperf-side-plan", "plan.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*mxperf: *{problem}*"])
    assert "Traceback" not in result.stderr.str()
    assert not (fake_pytester.path / "side.json").exists()


PAIR_SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

SPEED = {speed}

def test_fast(mxperf):
    mxperf.inference(FakeModel(SPEED), batch_size=8, model="fast")

def test_steady(mxperf):
    mxperf.inference(FakeModel(50.0), batch_size=8, model="steady")
"""


def _worktrees(path: Path) -> list[str]:
    return [line for line in git(path, "worktree", "list").splitlines() if line.strip()]


def test_paired_run_fails_only_the_slower_case(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=80.0))
    commit("slower")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*mxperf: paired run vs HEAD~1: round 1, rev (HEAD~1); sides 0/6, elapsed *",
            "*mxperf: paired run vs HEAD~1: round 2, head (HEAD); sides 2/6, elapsed *, about * left",
            "*fast/inference/float32/bs8/cpu: HEAD vs HEAD~1: -20.0% (99% interval -2*% .. -1*%, "
            "3 round(s)): slower, and a drop of 5% or more is not ruled out*",
            "*img/s per round (HEAD~1/HEAD): 100.0/80.0, 100.0/80.0, 100.0/80.0*",
        ]
    )
    cases = {c["key"]: c for c in _report(fake_pytester)["cases"]}
    fast = cases["fast/inference/float32/bs8/cpu"]
    assert fast["verdict"]["status"] == "regressed"
    assert fast["verdict"]["baseline_images_per_sec"] == pytest.approx(100.0)
    assert fast["measurement"]["images_per_sec"] == pytest.approx(80.0)
    assert cases["steady/inference/float32/bs8/cpu"]["verdict"]["status"] == "pass"
    rounds = _report(fake_pytester)["paired"]["rounds"]
    assert len(rounds) == 3 and set(rounds[0]) == {"rev", "head"}
    # Only the slower case is profiled: one more process per side, after the rounds.
    (profiled,) = _report(fake_pytester)["paired"]["profile_rounds"]
    assert {side: list(r["images_per_sec"]) for side, r in profiled.items()} == {
        "rev": ["fast/inference/float32/bs8/cpu"],
        "head": ["fast/inference/float32/bs8/cpu"],
    }
    result.stdout.fnmatch_lines(
        [
            "*paired run vs HEAD~1: profile, head (HEAD); sides 6, *",
            "*paired run vs HEAD~1: profile, rev (HEAD~1); sides 7, *",
        ]
    )
    assert fast["baseline_profile"] is not None and fast["profile"] is not None
    assert cases["steady/inference/float32/bs8/cpu"]["baseline_profile"] is None
    assert len(_worktrees(fake_pytester.path)) == 1  # REV's worktree is gone
    assert not (fake_pytester.path / "baselines").exists()


def _paired(pytester: pytest.Pytester, rev: str, *args: str) -> pytest.RunResult:
    """``pytest --mxperf --mxperf-ab rev`` with a JSON report, and ``args``."""
    return pytester.runpytest("--mxperf", "--mxperf-ab", rev, "--mxperf-json", "report.json", *args)


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

    def next_block(self):  # a lock-step side's timed block is done, its next turn not asked
        where("timing")
        return block_done(self)

    monkeypatch.setattr(turns.Baton, "next_block", next_block)

def test_where(mxperf):
    where("setup")
    mxperf.inference(FakeModel({speed}), batch_size=8, model="where")
"""


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs a platform that pins and 2 or more CPUs",
)
@pytest.mark.parametrize("setting", ["auto", "first"])
def test_both_sides_run_pinned_to_the_same_cpus(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
) -> None:
    usable = sorted(os.sched_getaffinity(0))
    auto = cpus.for_sides("auto")  # this machine's choice (tests/unit/test_cpus.py: the rule)
    chosen = (sorted(auto) if auto else usable) if setting == "auto" else usable[:1]
    flag = "auto" if setting == "auto" else str(usable[0])
    seen = fake_pytester.path / "seen"
    seen.mkdir()
    monkeypatch.setenv("AFFINITY_DIR", str(seen))
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
    assert _report(fake_pytester)["paired"]["cpus"] == (described if pinned else None)
    places: dict[str, dict[str, str]] = {}
    for path in seen.iterdir():
        pid, label = path.name.split(".")
        if pid != str(os.getpid()):  # the controller's own test (it measures nothing)
            places.setdefault(label, {})[pid] = path.read_text()
    assert len(places["setup"]) >= 6  # 3 rounds, 2 sides, each a process of its own
    assert places["timing"].keys() == places["setup"].keys()
    # Both sides time on the same CPUs; their setups, which run at once, on all of them.
    assert set(places["timing"].values()) == {",".join(map(str, chosen))}
    assert set(places["setup"].values()) == {",".join(map(str, usable))}
    assert sorted(os.sched_getaffinity(0)) == usable  # the controller is not pinned


@pytest.mark.parametrize("lockstep", ["on", "off"])
def test_sides_time_their_blocks_in_turns_unless_told_not_to(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], lockstep: str
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    result = _paired(fake_pytester, "HEAD", "--mxperf-pair-lockstep", lockstep)
    result.assert_outcomes(passed=2)
    rounds = _report(fake_pytester)["paired"]["rounds"]
    assert len(rounds) == 3
    for r in rounds:
        for side in ("rev", "head"):
            blocks = r[side]["blocks"]
            assert set(blocks) == {
                "fast/inference/float32/bs8/cpu",
                "steady/inference/float32/bs8/cpu",
            }
            for case in blocks.values():
                # In turns: the controller's 5 block pairs per case, flagged; alone: the
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
    rounds = _report(fake_pytester)["paired"]["rounds"]
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
    for r in _report(fake_pytester)["paired"]["rounds"]:
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
    seen = fake_pytester.path / "seen"
    seen.mkdir()
    monkeypatch.setenv("LOCK_SEEN", str(seen))
    fake_pytester.makepyfile(test_suite=LOCK_SUITE)
    commit("base")
    _paired(fake_pytester, "HEAD", "--mxperf-pair-lockstep", lockstep).assert_outcomes(passed=1)
    sides = {p.read_text() for p in seen.iterdir() if p.name != str(os.getpid())}
    assert sides == ({f"busy, pid {os.getpid()}"} if lockstep == "on" else {"free"})


def test_paired_run_case_missing_at_rev_and_rev_failing_to_import(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_other="import no_such_module\n")
    commit("broken file at REV")
    fake_pytester.makepyfile(
        test_suite=PAIR_SUITE.format(speed=100.0),
        test_other="""
            from pytest_mxperf.testing import FakeModel
            def test_other(mxperf):
                mxperf.inference(FakeModel(10.0), batch_size=1, model="other")
        """,
    )
    commit("HEAD")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-json", "report.json"
    )
    # REV's trouble is not HEAD's: those cases are "new", with the reason, and the run goes on.
    result.assert_outcomes(passed=3)
    verdicts = {c["model"]: c["verdict"] for c in _report(fake_pytester)["cases"]}
    assert {m: v["status"] for m, v in verdicts.items()} == {
        "fast": "new",
        "other": "new",
        "steady": "new",
    }
    assert verdicts["fast"]["message"] == (
        "fast/inference/float32/bs8/cpu: not measured at HEAD~1 (the case does not exist there)"
    )
    other = verdicts["other"]["message"]
    assert other.startswith("other/inference/float32/bs1/cpu: HEAD~1's side could not measure")
    assert "test_other.py: " in other and "no_such_module" in other
    assert "test_suite" not in other


def test_paired_run_refuses_unknown_revision_and_xdist(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("base")
    bad = fake_pytester.runpytest("--mxperf", "--mxperf-ab", "no-such-rev")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--mxperf-ab: unknown revision 'no-such-rev'*"])
    both = fake_pytester.runpytest("--mxperf", "--mxperf-ab", "HEAD", "--mxperf-update")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    # An option's existing path outside the repository becomes pytest's rootdir: named.
    outside = fake_pytester.path.parent / f"{fake_pytester.path.name}-elsewhere"
    outside.mkdir()
    (outside / "r.json").write_text("{}")
    moved = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD", "--mxperf-json", str(outside / "r.json")
    )
    assert moved.ret == pytest.ExitCode.USAGE_ERROR
    moved.stderr.fnmatch_lines(
        [
            # (the common ancestor of the repository and that path)
            f"*--mxperf-ab HEAD: no git repository at pytest's rootdir {outside.parent} (pytest "
            "picks it from the paths on the command line, option values included: write options "
            "as --mxperf-json=PATH, or give --rootdir)*"
        ]
    )


def _inflate_baselines(path: Path, factor: float, machine: str | None = None) -> None:
    """As if the baselines had been stored on a faster machine (with that anonymous id)."""
    for file in (path / "baselines").rglob("*.json"):
        data = json.loads(file.read_text())
        for case in data["cases"].values():
            case["images_per_sec"] *= factor
            case["runs"] = [r * factor for r in case["runs"]]
            if machine is not None:
                case["machine_ids"] = [machine] * len(case["runs"])
        file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


@pytest.fixture
def stored_elsewhere(fake_pytester: pytest.Pytester, commit: Callable[[str], str]) -> str:
    """Baselines stored at commit A, then raised 40% in the file (committed as B)."""
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    base = commit("A")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    _inflate_baselines(fake_pytester.path, 1.4, machine="0badc0ffee00")
    commit("B: baselines from a faster machine")
    return base


def test_arbitration_clears_a_figure_that_does_not_hold_here(
    fake_pytester: pytest.Pytester, stored_elsewhere: str
) -> None:
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*mxperf verdicts: 2 machine*"])
    verdict = {c["model"]: c["verdict"] for c in _report(fake_pytester)["cases"]}["fast"]
    assert verdict["status"] == "machine" and not verdict["failed"]
    lines = verdict["message"].splitlines()
    assert lines[0].startswith("fast/inference/float32/bs8/cpu: 100.0 img/s vs baseline 140.0")
    assert lines[1].startswith(
        f"but on this machine HEAD vs baseline commit {stored_elsewhere[:10]}: +0.0%"
    )
    assert (
        "the stored figure does not hold here (the baseline was measured on another "
        "machine)" in lines[1]
    )
    assert len(_worktrees(fake_pytester.path)) == 1
    result.stdout.fnmatch_lines(
        [
            "mxperf: 2 case(s) below their stored figures run as fast as the baseline commit on "
            "this machine*store a baseline for this machine with --mxperf-update*"
        ]
    )


def test_arbitration_confirms_a_real_regression_on_top(
    fake_pytester: pytest.Pytester, stored_elsewhere: str, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=80.0))
    commit("C: slower")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*fast/inference/float32/bs8/cpu: 80.0 img/s vs baseline 140.0 img/s (-42.9%)*",
            "*confirmed by a paired run on this machine: HEAD vs baseline commit "
            f"{stored_elsewhere[:10]}: -20.0%*",
        ]
    )
    verdicts = {c["model"]: c["verdict"]["status"] for c in _report(fake_pytester)["cases"]}
    assert verdicts == {"fast": "regressed", "steady": "machine"}


@pytest.mark.parametrize(("speed", "status"), [(100.0, "pass"), (96.0, "regressed")])
def test_a_pass_more_than_half_the_floor_below_its_figure_is_paired(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], speed: float, status: str
) -> None:
    """4% below the stored figure passes the 5% floor, but the stored figure is from another
    moment: the pair decides. The same code clears it; code 4% slower in every round is a
    certain loss whose interval reaches 5%, as in paired mode."""
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    base = commit("A")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    _inflate_baselines(fake_pytester.path, 1.04)
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=speed))
    commit("B")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    verdicts = {c["model"]: c["verdict"] for c in _report(fake_pytester)["cases"]}
    assert verdicts["fast"]["status"] == status
    assert verdicts["fast"]["rounds"] >= 3
    assert verdicts["fast"]["change"] < -0.038
    assert verdicts["steady"]["status"] == "pass"
    if status == "regressed":
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines(
            [f"*confirmed by a paired run on this machine: HEAD vs baseline commit {base[:10]}*"]
        )
    else:
        result.assert_outcomes(passed=2)
    assert len(_worktrees(fake_pytester.path)) == 1


def test_arbitration_off_judges_the_stored_figure_with_the_wider_floor(
    fake_pytester: pytest.Pytester, stored_elsewhere: str
) -> None:
    result = fake_pytester.runpytest("--mxperf", "--mxperf-arbitrate", "off")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*tolerance 20.0%*",
            "*not confirmed by a paired run (--mxperf-arbitrate is off): judged against the "
            "stored figure (the baseline was measured on another machine)*",
        ]
    )


def test_a_pair_in_todays_environment_does_not_clear_an_environment_change(
    fake_pytester: pytest.Pytester, stored_elsewhere: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MXNET_ENGINE_TYPE", "NaiveEngine")  # recorded, not keyed
    result = fake_pytester.runpytest("--mxperf")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*a paired run in today's environment cleared the code (HEAD vs baseline commit *: "
            "+0.0%*), so the drop comes from what changed since the baseline: "
            "MXNET_ENGINE_TYPE: unset -> NaiveEngine*",
        ]
    )


def test_an_unconfirmed_drop_within_the_floor_names_what_changed(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An upgrade that costs 15% passes the 20% floor when no pair can run; it is said, with the
    # change, in the verdict and the summary (not as a warning: the project's settings, like
    # many, make warnings errors). A drop within the noise says nothing.
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("A")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    for file in (fake_pytester.path / "baselines").rglob("*.json"):
        data = json.loads(file.read_text())
        data["cases"]["fast/inference/float32/bs8/cpu"]["images_per_sec"] *= 1.18
        data["cases"]["fast/inference/float32/bs8/cpu"]["runs"] = [118.0]
        file.write_text(json.dumps(data))
    commit("B")
    monkeypatch.setenv("MXNET_ENGINE_TYPE", "NaiveEngine")
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-arbitrate", "off", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=2)
    said = (
        "15.3% below its baseline, beyond this machine's noise (threshold 5.0%); not failed: "
        "without a paired run (--mxperf-arbitrate is off) a drop fails beyond 20.0%; changed "
        "since the baseline: MXNET_ENGINE_TYPE: unset -> NaiveEngine"
    )
    result.stdout.fnmatch_lines(
        [
            "mxperf: 1 case(s) passed below their stored figures by more than this machine's "
            "noise, with no paired run to check them (see each verdict): "
            "fast/inference/float32/bs8/cpu (-15.3%)"
        ]
    )
    cases = {c["model"]: c["verdict"] for c in _report(fake_pytester)["cases"]}
    assert cases["fast"]["status"] == "pass"
    assert cases["fast"]["message"].endswith("\n" + said)
    assert cases["fast"]["unconfirmed"] == said
    assert "below its baseline" not in cases["steady"]["message"]
    assert cases["steady"]["unconfirmed"] is None


def test_without_the_baseline_commit_the_wider_floor_applies(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=PAIR_SUITE.format(speed=100.0))
    commit("A")
    fake_pytester.runpytest("--mxperf", "--mxperf-update", "--mxperf-allow-dirty").assert_outcomes(
        passed=2
    )
    # A commit that is not in this clone (as after a shallow clone or a rebase).
    for file in (fake_pytester.path / "baselines").rglob("*.json"):
        file.rename(file.with_name("f" * 40 + ".json"))
        data = json.loads(file.with_name("f" * 40 + ".json").read_text())
        data["commit"]["sha"] = "f" * 40
        file.with_name("f" * 40 + ".json").write_text(json.dumps(data))
    _inflate_baselines(fake_pytester.path, 1.1)  # -9%: inside the 20% floor
    result = fake_pytester.runpytest("--mxperf", "--mxperf-compare", "f" * 40)
    result.assert_outcomes(passed=2)  # no warning: warnings are errors in many projects
    # ... but beyond the (noiseless) fake machine's noise: the user hears of it.
    result.stdout.fnmatch_lines(
        [
            "mxperf verdicts: 2 pass",
            "mxperf: 2 case(s) passed below their stored figures by more than this machine's "
            "noise, with no paired run to check them (see each verdict): "
            "fast/inference/float32/bs8/cpu (-9.1%), steady/inference/float32/bs8/cpu (-9.1%)",
        ]
    )
    # Beyond the floor, today's judgement, saying it was not confirmed and why.
    _inflate_baselines(fake_pytester.path, 1.3)  # -30%
    beyond = fake_pytester.runpytest("--mxperf", "--mxperf-compare", "f" * 40)
    beyond.assert_outcomes(failed=2)
    beyond.stdout.fnmatch_lines(
        [
            "*tolerance 20.0%*",
            "*not confirmed by a paired run (the baseline commit ffffffffff is not in this clone "
            "(shallow clone?)): judged against the stored figure*",
        ]
    )


SLOW_SUITE = """
import time
from pytest_mxperf.testing import FakeModel

def test_slow(mxperf):
    # Real seconds per call, so the controller can be interrupted while a side runs.
    mxperf.callable(lambda: time.sleep(0.05), items_per_call=1, model="slow")
"""


def test_ctrl_c_mid_round_leaves_no_worktree_process_or_file(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=SLOW_SUITE)
    commit("A")
    fake_pytester.makepyfile(test_suite=SLOW_SUITE + "\n# B\n")
    commit("B")
    before = sorted(p.name for p in fake_pytester.path.rglob("*") if ".git" not in p.parts)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--mxperf",
            "--mxperf-ab",
            "HEAD~1",
            "-p",
            "no:cacheprovider",
        ],
        cwd=fake_pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # A runner started in the background of a shell ignores SIGINT, and children inherit
        # that: give the controller Python's own Ctrl-C handling whatever this process has.
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 120
        while len(_worktrees(fake_pytester.path)) < 2:  # REV's worktree exists: a side runs
            assert time.monotonic() < deadline and proc.poll() is None, "no worktree appeared"
            time.sleep(0.1)
        time.sleep(1.0)
        sides = _children(proc.pid)
        assert sides, "no side process was running"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)  # never leave a Popen for the garbage collector to warn about
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out.decode()[-2000:]
    assert len(_worktrees(fake_pytester.path)) == 1
    assert not [pid for pid in sides if Path(f"/proc/{pid}").exists()], "a side outlived it"
    after = sorted(p.name for p in fake_pytester.path.rglob("*") if ".git" not in p.parts)
    assert [p for p in after if p not in before and "__pycache__" not in p] == []


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` now (from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        kids = [p for p, parent in parents.items() if parent == current]
        found += kids
        frontier += kids
    return found


NOISY_SUITE = """
from pytest_mxperf.testing import FakeModel

SPEED = {speed}

def test_noisy(mxperf):
    mxperf.inference(FakeModel(SPEED, jitter=0.25, seed=3), batch_size=8, model="noisy")
"""


def test_a_loss_hidden_by_block_noise_is_still_paired_and_confirmed(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=NOISY_SUITE.format(speed=100.0))
    commit("A")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=1)
    commit("baselines")
    fake_pytester.makepyfile(test_suite=NOISY_SUITE.format(speed=90.0))
    commit("B: 10% slower")
    # The stored threshold alone (2 x the blocks' noise) lets -10% pass ...
    off = fake_pytester.runpytest(
        "--mxperf", "--mxperf-arbitrate", "off", "--mxperf-json", "r.json"
    )
    off.assert_outcomes(passed=1)
    stored = _report(fake_pytester, "r.json")["cases"][0]["verdict"]
    assert stored["status"] == "pass" and stored["change"] < -0.05 < stored["threshold"]
    # ... but beyond the 5% floor a pair is asked, and it confirms the loss.
    on = fake_pytester.runpytest("--mxperf", "--mxperf-json", "r.json")
    on.assert_outcomes(failed=1)
    verdict = _report(fake_pytester, "r.json")["cases"][0]["verdict"]
    assert verdict["status"] == "regressed" and verdict["rounds"] >= 3
    assert "confirmed by a paired run on this machine" in verdict["message"]


# The fake MXNet version: FAKE_MXNET when set, else what the interpreter's environment holds
# (a marker file that the per-revision environment of --mxperf-env-command gets).
VERSIONED_CONFTEST = """
import os
import sys
from pathlib import Path

import pytest
from pytest_mxperf.testing import FakeBackend


def _mxnet():
    if os.environ.get("FAKE_MXNET"):
        return os.environ["FAKE_MXNET"]
    return "fake-1.8" if (Path(sys.prefix) / "fake-mxnet-1.8").exists() else "fake-1.9.1"


@pytest.fixture(scope="session")
def mxperf_backend():
    return FakeBackend(software={"mxnet": _mxnet(), "python": "3.11", "numpy": "1.23"})
"""

# Run by --mxperf-env-command in the new environment: it sees this environment's packages
# (pytest, the plugin's dependencies) and holds "MXNet 1.8" (the marker file).
MAKE_ENV = """
import pathlib, sys, sysconfig
site = pathlib.Path(sysconfig.get_paths()["purelib"])
site.mkdir(parents=True, exist_ok=True)
(site / "outer.pth").write_text({outer!r})
pathlib.Path(sys.prefix, "fake-mxnet-1.8").touch()
"""


@pytest.fixture
def stored_under_old_mxnet(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> str:
    """Baselines stored at commit A under "MXNet 1.8", raised 40% (committed as B); today's
    environment has "MXNet 1.9.1". Worktrees and environments go under ``tmp_path``."""
    import site
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    fake_pytester.makeconftest(VERSIONED_CONFTEST)
    outer = "\n".join([*site.getsitepackages(), *sys.path[:1]]) + "\n"
    fake_pytester.makepyfile(
        test_suite=PAIR_SUITE.format(speed=100.0), make_env=MAKE_ENV.format(outer=outer)
    )
    base = commit("A")
    monkeypatch.setenv("FAKE_MXNET", "fake-1.8")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    monkeypatch.delenv("FAKE_MXNET")
    _inflate_baselines(fake_pytester.path, 1.4)
    commit("B: baselines from a faster machine, under MXNet 1.8")
    return base


def test_a_pair_in_the_baselines_environment_judges_code_and_software_together(
    fake_pytester: pytest.Pytester, stored_under_old_mxnet: str, tmp_path: Path
) -> None:
    # Today's environment: the pair clears the code, the MXNet change stays the suspect.
    today = fake_pytester.runpytest("--mxperf")
    today.assert_outcomes(failed=2)
    today.stdout.fnmatch_lines(
        [
            "*cleared the code*, so the drop comes from what changed since the baseline: "
            "mxnet: fake-1.8 -> fake-1.9.1*"
        ]
    )
    assert "the sides ran different software" not in today.stdout.str()
    # The baseline side in the baseline commit's own environment ("MXNet 1.8"): the pair
    # covers code and software, finds no loss, so the stored figure does not hold here.
    command = "{python} {wt}/make_env.py"
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-env-command", command, "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=2)
    verdicts = {c["model"]: c["verdict"] for c in _report(fake_pytester)["cases"]}
    assert {m: v["status"] for m, v in verdicts.items()} == {"fast": "machine", "steady": "machine"}
    assert (
        "changed since the baseline: mxnet: fake-1.8 -> fake-1.9.1" in verdicts["fast"]["message"]
    )
    assert (
        f"\nthe sides ran different software (baseline commit {stored_under_old_mxnet[:10]} -> "
        "HEAD): mxnet: fake-1.8 -> fake-1.9.1" in verdicts["fast"]["message"]
    )
    # One environment for the revision, reused by the second case, left in the cache.
    (built,) = list((tmp_path / "tmp").glob("pytest-mxperf-cache-*/envs/*"))
    assert built.name.startswith(stored_under_old_mxnet[:12])
    assert (built / "fake-mxnet-1.8").exists()
    # Paired mode across environments says what each side ran as well.
    paired_run = fake_pytester.runpytest(
        "--mxperf",
        "--mxperf-ab",
        "HEAD~1",
        "--mxperf-env-command",
        command,
        "--mxperf-json",
        "ab.json",
    )
    paired_run.assert_outcomes(passed=2)
    for case in _report(fake_pytester, "ab.json")["cases"]:
        assert case["verdict"]["status"] == "pass"
        assert (
            "\nthe sides ran different software (HEAD~1 -> HEAD): mxnet: fake-1.8 -> fake-1.9.1"
            in case["verdict"]["message"]
        )


def test_an_environment_that_cannot_be_built_is_a_clear_error(
    fake_pytester: pytest.Pytester, stored_under_old_mxnet: str
) -> None:
    command = "no-such-program-for-mxperf {wt}"
    # Arbitration: the stored judgement stands, saying why no pair could confirm it.
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-env-command", command, "--mxperf-json", "report.json"
    )
    result.assert_outcomes(failed=2)
    assert "Traceback" not in result.stdout.str()
    for case in _report(fake_pytester)["cases"]:
        message = case["verdict"]["message"]
        assert case["verdict"]["status"] == "regressed"
        assert (
            f"not confirmed by a paired run: revision {stored_under_old_mxnet[:10]} cannot "
            "be measured here: building the environment" in message
        )
        assert "no-such-program-for-mxperf" in message
    # Paired mode: a usage error naming the revision and the failed build, not a traceback.
    paired_run = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-env-command", command
    )
    assert paired_run.ret == pytest.ExitCode.USAGE_ERROR
    paired_run.stderr.fnmatch_lines(
        [
            "*mxperf: --mxperf-ab HEAD~1: revision * cannot be measured here: building the "
            "environment of revision * could not start*"
        ]
    )
    assert len(_worktrees(fake_pytester.path)) == 1


WOBBLY_SUITE = """
import pathlib
from pytest_mxperf.testing import FakeModel

# REV runs at 100 img/s; HEAD's processes (the controller's collection included) at 108, 96,
# 106, ... img/s in turn: no slower on average, too spread for 3 rounds to decide.
HERE = pathlib.Path(__file__).resolve().parent
COUNTER = pathlib.Path({counter!r})
if HERE == pathlib.Path({head!r}).resolve():
    n = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(n + 1))
    SPEED = (108.0, 96.0, 106.0)[n % 3]
else:
    SPEED = 100.0

def test_wobbly(mxperf):
    mxperf.inference(FakeModel(SPEED), batch_size=8, model="wobbly")
"""


@pytest.mark.parametrize("strict", [False, True])
def test_an_undecided_case_that_is_not_slower_gets_no_more_rounds_unless_strict(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], strict: bool
) -> None:
    counter = fake_pytester.path.parent / f"{fake_pytester.path.name}.count"
    suite = WOBBLY_SUITE.format(counter=str(counter), head=str(fake_pytester.path))
    fake_pytester.makepyfile(test_suite=suite)
    commit("A")
    fake_pytester.makepyfile(test_suite=suite + "\n# B\n")
    commit("B")
    flags = ["--mxperf-strict"] if strict else []
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-max-rounds", "5", "--mxperf-json",
        "report.json", *flags,
    )  # fmt: skip
    report = _report(fake_pytester)
    verdict = report["cases"][0]["verdict"]
    assert verdict["status"] == "inconclusive" and verdict["change"] > 0
    assert report["paired"]["profile_rounds"] == []  # nothing slower to profile
    if strict:  # inconclusive fails here: every round up to the cap is worth running
        result.assert_outcomes(failed=1)
        assert len(report["paired"]["rounds"]) == 5 and verdict["rounds"] == 5
        assert "inconclusive, but not slower" in verdict["message"]
    else:  # it passes either way: no round beyond the first 3
        result.assert_outcomes(passed=1)
        assert len(report["paired"]["rounds"]) == 3 and verdict["rounds"] == 3
        first = verdict["message"].splitlines()[0]
        suggested = re.search(r": inconclusive, but not slower; about (\d+) rounds", first)
        assert suggested and first.endswith(f" would decide (--mxperf-rounds {suggested[1]})")
