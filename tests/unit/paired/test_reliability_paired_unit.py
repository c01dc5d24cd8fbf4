"""Paired runs, reliability round 3 (issue 29): the pure parts (requirements of REV's
environment, a failed side's message, errors on either side, clipping long messages)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_mxperf.config import parsers
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging.explain import clip_lines
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.paired import envs, siderun
from pytest_mxperf.paired.pairdata import HEAD, REV, PairedData, SideResult
from pytest_mxperf.paired.rounds import side_outcome
from pytest_mxperf.paired.turns import BLOCK, GO, SOLO, Conductor
from pytest_mxperf.system import scratch
from pytest_mxperf.system.procgroup import Finished
from pytest_mxperf.testing import fake_blocks


def test_revs_environment_gets_the_plugins_requirements_without_extras() -> None:
    required = envs.plugin_requirements()
    names = {r.split("<")[0].split(">")[0].split("=")[0].strip().lower() for r in required}
    assert {"tabulate", "gitpython", "pytest", "numpy"} <= names
    assert not any("extra" in r or "mxnet" in r.lower() for r in required)
    assert envs.plugin_requirements("no-such-distribution-for-mxperf") == []


def test_the_requirements_are_part_of_an_environments_key(tmp_path: Path) -> None:
    plain = envs.env_key("{python} -c pass", str(tmp_path), "a" * 40, "3.11")
    assert plain == envs.env_key("{python} -c pass", str(tmp_path), "a" * 40, "3.11", ())
    assert plain != envs.env_key("{python} -c pass", str(tmp_path), "a" * 40, "3.11", ["x<2"])


def test_a_side_that_died_without_results_says_how_with_its_last_lines() -> None:
    tail = "\n".join(f"line {i}" for i in range(30)) + "\nModuleNotFoundError: tabulate"
    died = side_outcome(SideResult(error="no results ([Errno 2])"), Finished(1, False, 1, tail), 9)
    assert died.error is not None
    first, *rest = died.error.splitlines()
    assert first == (
        "the side process exited with code 1 and wrote no results; the last lines of its output:"
    )
    assert rest[-1] == "ModuleNotFoundError: tabulate" and len(rest) == 15
    killed = side_outcome(SideResult(), Finished(-9, False, 1, ""), 9)
    assert killed.error == "the side process was killed by SIGKILL and wrote no results"
    # A side that ran and reported (pytest's exit 1: a test failed) keeps its results.
    ran = SideResult(collect_errors=[("t.py", "SyntaxError")])
    assert side_outcome(ran, Finished(1, False, 1, "x"), 9).error is None


def _case(status: Status = Status.OK, rate: float | None = 100.0, error: str = "") -> CaseResult:
    key = CaseKey("m", "inference", "float32", 8, "cpu")
    measurement = None if rate is None else fake_blocks(rate, 8, 0.0)
    return CaseResult(
        key=key,
        device="cpu(0)",
        hardware="cpu-test",
        status=status,
        error=error or None,
        measurement=measurement,
    )


def _round(
    rev: CaseResult | None, head: CaseResult | None, head_error: str | None = None
) -> dict[str, SideResult]:
    return {
        REV: SideResult({KEY: rev} if rev else {}),
        HEAD: SideResult({KEY: head} if head else {}, error=head_error),
    }


KEY = CaseKey.parse("m/inference/float32/bs8/cpu")


def test_an_error_on_either_side_is_broken_never_new() -> None:
    data = PairedData("HEAD", "a" * 40, head_name="the working tree")
    data.rounds = [
        _round(_case(), _case(Status.ERROR, None, "ValueError: breaks forward")),
        _round(_case(), _case(Status.ERROR, None, "ValueError: breaks forward")),
    ]
    assert data.broken_message(KEY) == (
        Status.ERROR,
        "the working tree's side measured nothing in rounds 1, 2: ValueError: breaks forward",
    )
    data.rounds = [_round(_case(Status.NAN, None), _case())]
    status, text = data.broken_message(KEY) or (None, "")
    assert status is Status.NAN and text.startswith("HEAD's side measured nothing in round 1")


def test_a_round_where_one_side_lost_a_case_the_other_measured_is_broken() -> None:
    data = PairedData("HEAD~1", "a" * 40)
    data.rounds = [
        _round(_case(), _case()),
        _round(_case(), None, head_error="the side process was killed by SIGKILL"),
        _round(_case(), None),
    ]
    assert data.broken(HEAD, KEY) == [
        (2, Status.ERROR, "the side process was killed by SIGKILL"),
        (3, Status.ERROR, "the side process did not report the case"),
    ]
    assert data.broken(REV, KEY) == []


def test_a_case_revs_side_never_had_is_not_broken() -> None:
    # It does not exist at REV (or REV's file does not collect): "new", with the reason.
    data = PairedData("HEAD~1", "a" * 40)
    data.rounds = [_round(None, _case()), _round(None, _case())]
    assert data.broken(REV, KEY) == [] and data.broken_message(KEY) is None


def test_clip_lines_keeps_the_first_and_last_whole_lines() -> None:
    text = "first line\n" + "\n".join(f"frame {i:03d}" for i in range(500)) + "\nSyntaxError: x"
    clipped = clip_lines(text, limit=200)
    lines = clipped.splitlines()
    assert lines[0] == "first line" and lines[-1] == "SyntaxError: x"
    assert lines[1].startswith("... (") and len(clipped) < 260
    assert all(line.startswith("frame ") for line in lines[2:-1])
    assert clip_lines("short") == "short"


@pytest.mark.parametrize("text", ["", "  "])
def test_an_empty_revision_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="an empty revision"):
        parsers.revision(text)
    assert parsers.revision("HEAD~1") == "HEAD~1"


def test_scratch_directories_of_processes_that_are_gone_are_swept(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    where = scratch.root(tmp_path)
    assert where == tmp_path / f"pytest-mxperf-{os.getuid()}" / "scratch"
    (where / f"mxperf-pair-{dead.pid}-abcdefgh").mkdir()
    (where / f"mxperf-dist-{os.getpid()}-abcdefgh").mkdir()  # this process: alive
    (where / "someone-elses").mkdir()
    with scratch.directory("side", tmp_path) as made:
        assert made.name.startswith(f"mxperf-side-{os.getpid()}-") and made.is_dir()
        names = sorted(p.name for p in where.iterdir())
        assert f"mxperf-pair-{dead.pid}-abcdefgh" not in names
        assert f"mxperf-dist-{os.getpid()}-abcdefgh" in names and "someone-elses" in names
    assert not made.exists()


def _solo(key: str, nodeid: str) -> dict[str, object]:
    return {"ready": key, "nodeid": nodeid, "solo": True}


IDS = ["t.py::dp", "t.py::b"]


def test_a_data_parallel_case_runs_alone_one_side_after_the_other() -> None:
    # Overlapping set-ups: still, a launch (its ranks' set-up included) is a timed turn.
    c = Conductor(("rev", "head"), IDS, pairs=2, overlap=True)
    assert c.event("head", {"hello": "head"}) == []
    assert c.event("rev", {"hello": "rev"}) == [("rev", GO), ("head", GO)]
    # REV asks to launch while HEAD still collects: it waits until HEAD is idle too.
    assert c.event("rev", _solo("DP", IDS[0])) == []
    assert c.event("head", _solo("DP", IDS[0])) == [("rev", SOLO)]
    assert c.sides["head"].state == "ready"  # HEAD's launch waits for REV's turn to end
    # REV's launch is over: it asks for its next case; only now does HEAD launch.
    assert c.event("rev", {"ready": "B", "nodeid": IDS[1]}) == [("head", SOLO)]
    assert c.locked == []
    # Then the next case in turns, as usual.
    assert c.event("head", {"ready": "B", "nodeid": IDS[1]}) == [("rev", BLOCK)]
    assert c.locked == ["B"]


# A signal before both sides of a lock-step round have started --------------------------------
def _interrupted_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, in_hold: bool
) -> list[str]:
    """`siderun.run_together` with a Ctrl-C in ``hold()`` (the device locks) or between the
    two sides' starts; returns the sides that ran (each ends once the round is cancelled)."""
    ran: list[str] = []

    def fake_side(side: Any, args: list[str], server: Any, timeout: float, cancelled: Any) -> Any:
        ran.append(side.name)
        assert cancelled.wait(30), "the round was never cancelled"
        return Finished(-2, False, 0.0, "cancelled")

    class SecondStartInterrupted(threading.Thread):
        starts = 0

        def start(self) -> None:
            SecondStartInterrupted.starts += 1
            if SecondStartInterrupted.starts == 2:
                raise KeyboardInterrupt
            super().start()

    @contextlib.contextmanager
    def hold() -> Iterator[None]:
        if in_hold:
            raise KeyboardInterrupt
        yield

    monkeypatch.setattr(siderun, "run_side", fake_side)
    monkeypatch.setattr(threading, "Thread", SecondStartInterrupted)
    order: list[tuple[str, Any, list[str], Path]] = [
        (name, SimpleNamespace(name=name, spread=None), [], tmp_path) for name in "ab"
    ]
    with pytest.raises(KeyboardInterrupt):
        siderun.run_together(order, lambda _: None, 5.0, ["t::x"], tmp_path, hold)
    assert not (tmp_path / "turns.sock").exists()
    return ran


def test_a_signal_while_the_round_waits_for_the_device_locks_starts_no_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _interrupted_round(tmp_path, monkeypatch, in_hold=True) == []


def test_a_signal_between_the_sides_starts_ends_the_one_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Joining the thread never started raised "cannot join thread before it is started" over
    # the KeyboardInterrupt (an INTERNALERROR, seen once under pytest -n 2); the one started
    # is cancelled and joined.
    assert _interrupted_round(tmp_path, monkeypatch, in_hold=False) == ["a"]
