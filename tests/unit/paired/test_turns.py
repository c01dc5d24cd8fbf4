"""Lock-step sides: who the controller lets run next, and a side's end of the socket."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.sideorders import Turns
from pytest_mxperf.paired.turns import BLOCK, END, GO, SOLO, Baton, BatonLost, Conductor

IDS = ["t.py::a", "t.py::b", "t.py::c"]


def _ready(key: str, nodeid: str) -> dict[str, str]:
    return {"ready": key, "nodeid": nodeid}


def test_two_sides_with_the_same_cases_time_them_abba_one_side_at_a_time() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=3)
    assert c.event("head", {"hello": "head"}) == []  # both start in the round's order
    assert c.event("rev", {"hello": "rev"}) == [("rev", GO)]
    assert c.event("rev", _ready("A", IDS[0])) == [("head", GO)]
    turns = c.event("head", _ready("A", IDS[0]))
    for _ in range(6):
        ((side, reply),) = turns
        assert reply == BLOCK
        turns = c.event(side, {"done": 1})
    # Both said done after 6 blocks (3 pairs ABBA, rev leading): the case is over.
    assert turns == [("rev", END)]
    assert c.locked == ["A"]
    assert c.event("rev", _ready("B", IDS[1])) == [("head", END)]
    assert c.event("head", _ready("B", IDS[1])) == [("rev", BLOCK)]


def test_the_block_order_is_abba_led_by_the_rounds_first_side() -> None:
    c = Conductor(("head", "rev"), IDS, pairs=3)
    c.event("rev", {"hello": "rev"})
    c.event("head", {"hello": "head"})
    c.event("rev", _ready("A", IDS[0]))
    order = [side for side, _ in c.event("head", _ready("A", IDS[0]))]
    while True:
        replies = c.event(order[-1], {"done": 1})
        if replies[0][1] != BLOCK:
            break
        order.append(replies[0][0])
    assert order == ["head", "rev", "rev", "head", "head", "rev"]


def test_a_case_only_one_side_has_is_measured_alone_and_the_rest_in_turns() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=1)
    c.event("rev", {"hello": "rev"})
    c.event("head", {"hello": "head"})
    # REV has no t.py::a (missing, or failed before measuring): it is at b, HEAD at a.
    c.event("rev", _ready("B", IDS[1]))
    assert c.event("head", _ready("A", IDS[0])) == [("head", SOLO)]
    assert c.event("head", _ready("B", IDS[1])) == [("rev", BLOCK)]
    assert c.locked == ["B"]


def test_within_a_test_a_case_in_a_turn_of_its_own_goes_before_a_later_one_in_turns() -> None:
    # One test measures a sweep point alone (a loader's workers) and then a case in turns:
    # REV (the round's first side) is through the point and ready for the next case while
    # HEAD still waits for its own turn of the point; HEAD goes, then both time the next case
    # in turns (before, REV went alone: the case was never timed in turns).
    c = Conductor(("rev", "head"), IDS, pairs=1)
    c.event("rev", {"hello": "rev"})
    c.event("head", {"hello": "head"})
    c.event("head", {"ready": "P", "nodeid": IDS[0], "solo": True})
    assert c.event("rev", _ready("E", IDS[0])) == [("head", SOLO)]
    assert c.event("head", _ready("E", IDS[0])) == [("rev", BLOCK)]
    assert c.locked == ["E"]


def test_a_side_gone_mid_case_frees_the_other_which_then_goes_alone() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=3)
    c.event("rev", {"hello": "rev"})
    c.event("head", {"hello": "head"})
    c.event("rev", _ready("A", IDS[0]))
    ((first, _),) = c.event("head", _ready("A", IDS[0]))
    assert first == "rev"
    assert c.event("rev", {"done": 1}) == [("head", BLOCK)]
    assert c.event("head", None) == [("rev", END)]  # HEAD crashed in its block
    assert c.event("rev", _ready("B", IDS[1])) == [("rev", SOLO)]
    assert c.event("rev", None) == [] and c.done()


def test_a_side_waits_for_one_still_starting() -> None:
    c = Conductor(("rev", "head"), IDS)
    assert c.event("rev", {"hello": "rev"}) == []  # head has not connected yet
    assert c.event("head", None) == [("rev", GO)]  # and never will: rev goes on alone
    assert c.event("rev", _ready("A", IDS[0])) == [("rev", SOLO)]


def test_overlapping_sides_set_up_at_once_and_time_alone() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=2, overlap=True)
    assert c.event("head", {"hello": "head"}) == []  # both start in the round's order
    assert c.event("rev", {"hello": "rev"}) == [("rev", GO), ("head", GO)]
    # REV is warm; HEAD still sets up: nothing is timed beside it.
    assert c.event("rev", _ready("A", IDS[0])) == []
    turns = c.event("head", _ready("A", IDS[0]))
    order = []
    while turns[0][1] == BLOCK:
        ((side, _),) = turns  # one side at a time
        order.append(side)
        turns = c.event(side, {"done": 1})
    assert order == ["rev", "head", "head", "rev"]
    assert turns == [("rev", END), ("head", END)]  # both set up their next case at once
    # REV has no t.py::b: it is at c, HEAD at b. Alone only once the other is idle.
    assert c.event("rev", _ready("C", IDS[2])) == []
    assert c.event("head", _ready("B", IDS[1])) == [("head", SOLO)]
    assert c.event("head", _ready("C", IDS[2])) == [("rev", BLOCK)]
    assert c.locked == ["A", "C"]


def test_overlapping_sides_never_time_beside_a_side_still_busy() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=1, overlap=True)
    c.event("rev", {"hello": "rev"})
    c.event("head", {"hello": "head"})
    assert c.event("rev", _ready("A", IDS[0])) == []
    assert c.event("head", None) == [("rev", SOLO)]  # HEAD is gone: REV goes on alone
    assert c.event("rev", None) == [] and c.done()


def test_an_unknown_message_is_named() -> None:
    c = Conductor(("rev", "head"), IDS)
    with pytest.raises(ValueError, match="side rev: unexpected message"):
        c.event("rev", {"what": 1})


def _serve(path: Path, replies: list[str], seen: list[dict[str, object]]) -> threading.Thread:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def run() -> None:
        conn, _ = listener.accept()
        with conn, conn.makefile("rwb") as f:
            for reply in replies:
                seen.append(json.loads(f.readline()))
                f.write((json.dumps(reply) + "\n").encode())
                f.flush()
            seen.append(json.loads(f.readline() or b"{}"))
        listener.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_side_asks_and_follows_the_answers(tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []
    t = _serve(tmp_path / "s", [GO, BLOCK, BLOCK, END], seen)
    baton = Baton(Turns("rev", tmp_path / "s"))
    assert baton.ready("t.py::a", CaseKey.parse("a/inference/float32/bs1/cpu")) is True
    assert baton.next_block(100.0) is True
    assert baton.next_block(99.5) is False
    baton.close()
    t.join(5)
    assert seen == [
        {"hello": "rev"},
        {"ready": "a/inference/float32/bs1/cpu", "nodeid": "t.py::a"},  # the key's text
        {"done": 1, "rate": 100.0},
        {"done": 1, "rate": 99.5},
        {},  # the side closed its end
    ]


def test_a_side_whose_controller_is_gone_says_so(tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []
    t = _serve(tmp_path / "s", [GO], seen)
    baton = Baton(Turns("head", tmp_path / "s"))
    # The controller answered hello, reads the next question and closes without an answer.
    with pytest.raises(BatonLost, match="controller is gone"):
        baton.ready("t.py::a", CaseKey.parse("a/inference/float32/bs1/cpu"))
    baton.close()
    t.join(5)


#: The tests of where a side's threads run: they need CPU affinity and two CPUs to move between.
TWO_CPUS = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs two CPUs this process may use, and CPU affinity",
)

_PLACES = """
import json, os, sys, threading
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.sideorders import parse_turns
from pytest_mxperf.paired.turns import Baton
os.sched_setaffinity(0, {timing})
seen = {{}}
ask, tell = threading.Event(), threading.Event()
tid = []

def worker() -> None:  # a thread started before the baton moves anything, like MXNet's
    tid.append(threading.get_native_id())
    ask.wait()

t = threading.Thread(target=worker)
t.start()
while not tid:
    pass

def where(label):
    seen[label] = sorted(os.sched_getaffinity(tid[0]))

baton = Baton(parse_turns(sys.argv[1]), frozenset({spread}))
where("go")
{steps}
baton.ready("t.py::a", CaseKey.parse("a/inference/float32/bs1/cpu"))
where("block")
baton.next_block(100.0)
where("end")
baton.close()
ask.set()
t.join()
print(json.dumps(seen))
"""


@TWO_CPUS
def test_a_side_moves_all_its_threads_to_the_wider_cpus_for_untimed_work(tmp_path: Path) -> None:
    usable = sorted(os.sched_getaffinity(0))
    timing, spread = {usable[-1]}, set(usable)
    seen: list[dict[str, object]] = []
    t = _serve(tmp_path / "s", [GO, BLOCK, END], seen)
    assert _places(tmp_path, timing, spread, "") == {
        "go": sorted(spread),  # set up anywhere
        "block": sorted(timing),  # timed where the other side times
        "end": sorted(spread),
    }
    t.join(5)


@TWO_CPUS
def test_a_case_run_alone_gets_the_wider_cpus(tmp_path: Path) -> None:
    # A data-parallel launch or an input pipeline, run in a turn of its own: nothing of the
    # other side runs, so its ranks and loader workers get every CPU, as in a run of its own.
    usable = sorted(os.sched_getaffinity(0))
    timing, spread = {usable[-1]}, set(usable)
    seen: list[dict[str, object]] = []
    t = _serve(tmp_path / "s", [GO, SOLO, BLOCK, END], seen)
    steps = 'baton.alone("t.py::b", "B")\nwhere("alone")'
    assert _places(tmp_path, timing, spread, steps) == {
        "go": sorted(spread),
        "alone": sorted(spread),
        "block": sorted(timing),
        "end": sorted(spread),
    }
    t.join(5)
    assert seen[1] == {"ready": "B", "nodeid": "t.py::b", "solo": True}


@TWO_CPUS
def test_a_case_in_turns_told_wide_times_its_blocks_on_the_wider_cpus(tmp_path: Path) -> None:
    # An input pipeline that decodes in the caller's thread: in turns, but where a run of its
    # own would time it; the next case in turns is pinned again.
    usable = sorted(os.sched_getaffinity(0))
    timing, spread = {usable[-1]}, set(usable)
    seen: list[dict[str, object]] = []
    t = _serve(tmp_path / "s", [GO, BLOCK, BLOCK, END, BLOCK, END], seen)
    steps = (
        'baton.ready("t.py::w", "W", wide=True)\nwhere("wide")\n'
        'baton.next_block(1.0, wide=True)\nwhere("wide again")\nbaton.next_block(1.0, wide=True)'
    )
    assert _places(tmp_path, timing, spread, steps) == {
        "go": sorted(spread),
        "wide": sorted(spread),
        "wide again": sorted(spread),
        "block": sorted(timing),
        "end": sorted(spread),
    }
    t.join(5)
    assert seen[1] == {"ready": "W", "nodeid": "t.py::w"}  # the controller sees turns as ever


def _places(tmp_path: Path, timing: set[int], spread: set[int], steps: str) -> object:
    """Run _PLACES (``steps`` after its first turn) against the server at ``tmp_path / s``:
    where its thread was after each step."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _PLACES.format(timing=timing, spread=spread, steps=steps),
            f"rev={tmp_path / 's'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)
