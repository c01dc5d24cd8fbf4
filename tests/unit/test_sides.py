"""Paired-run sides as real subprocesses: tiny Python children, no MXNet.

Every test that starts a child checks afterwards, through /proc, that neither the child nor a
grandchild it spawned is still running.
"""

from __future__ import annotations

import json
import signal
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from pytest_mxperf.sides import (
    Phase,
    Progress,
    Side,
    SideStatus,
    read_cases,
    round_order,
    run_rounds,
    run_side,
)

MakeSide = Callable[[str, str], Side]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")

# One child program for all tests; its behaviour is chosen by argv.
CHILD = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    mode, name, rnd, output, log, pids = sys.argv[1:7]
    with open(log, "a") as f:
        f.write(f"{name} {rnd}\\n")
    if mode == "ok":
        with open(output, "w") as f:
            json.dump([{"side": name, "round": int(rnd), "images_per_sec": 100.0}], f)
    elif mode == "fail":
        for i in range(60):
            print(f"stderr line {i}", file=sys.stderr)
        sys.exit(1)
    elif mode == "fail-round-0":
        if rnd == "0":
            sys.exit("failing on round 0 only")
        with open(output, "w") as f:
            json.dump([{"side": name, "round": int(rnd)}], f)
    elif mode == "garbled":
        with open(output, "w") as f:
            f.write('[{"side": ')
    elif mode == "not-a-list":
        with open(output, "w") as f:
            json.dump({"side": name}, f)
    elif mode == "no-output":
        pass
    elif mode in ("hang", "leave-grandchild"):
        # The grandchild ignores SIGTERM, so only the SIGKILL of the group ends it.
        gc = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
        with open(pids + ".tmp", "w") as f:
            f.write(f"{os.getpid()}\\n{gc.pid}\\n")
        os.replace(pids + ".tmp", pids)
        if mode == "hang":
            time.sleep(120)
        with open(output, "w") as f:
            json.dump([], f)
    """
)


def running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def read_pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


@pytest.fixture
def make_side(tmp_path: Path) -> Iterator[MakeSide]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    log = tmp_path / "order.log"
    pids = tmp_path / "pids"

    def make(name: str, mode: str) -> Side:
        argv = (sys.executable, str(script), mode, name, "{round}", "{output}", str(log), str(pids))
        return Side(name, argv, tmp_path, None, str(tmp_path / "out" / f"{name}-{{round}}.json"))

    yield make
    # Whatever a test did, nothing it started may outlive it.
    if pids.exists():
        still = [pid for pid in read_pids(pids) if running(pid)]
        assert not still, f"processes left running: {still}"


def test_round_order_alternates() -> None:
    a = Side("rev", ("x",), Path("."), None, "a")
    b = Side("head", ("x",), Path("."), None, "b")
    assert [tuple(s.name for s in round_order([a, b], k)) for k in range(4)] == [
        ("rev", "head"),
        ("head", "rev"),
        ("rev", "head"),
        ("head", "rev"),
    ]


def test_rounds_alternate_and_read_each_sides_cases(make_side: MakeSide, tmp_path: Path) -> None:
    rev, head = make_side("rev", "ok"), make_side("head", "ok")
    results = run_rounds([rev, head], rounds=3, timeout=60)

    assert [r.order for r in results] == [("rev", "head"), ("head", "rev"), ("rev", "head")]
    # The children themselves logged the order they really ran in.
    assert (tmp_path / "order.log").read_text().split("\n")[:-1] == [
        "rev 0",
        "head 0",
        "head 1",
        "rev 1",
        "rev 2",
        "head 2",
    ]
    for r in results:
        assert not r.failures
        for name in ("rev", "head"):
            res = r.result(name)
            assert res.status is SideStatus.OK
            assert res.returncode == 0
            assert res.cases == ({"side": name, "round": r.index, "images_per_sec": 100.0},)


def test_first_round_continues_the_alternation(make_side: MakeSide) -> None:
    rev, head = make_side("rev", "ok"), make_side("head", "ok")
    results = run_rounds([rev, head], rounds=2, timeout=60, first_round=3)
    assert [(r.index, r.order) for r in results] == [(3, ("head", "rev")), (4, ("rev", "head"))]
    assert results[0].result("rev").cases[0]["round"] == 3


def test_failing_side_reports_its_stderr_tail_and_the_other_side_goes_on(
    make_side: MakeSide,
) -> None:
    rev, head = make_side("rev", "fail"), make_side("head", "ok")
    results = run_rounds([rev, head], rounds=2, timeout=60)

    for r in results:
        bad = r.result("rev")
        assert bad.status is SideStatus.FAILED
        assert bad.returncode == 1
        assert bad.cases == ()
        assert bad.message == f"side 'rev', round {r.index}: exited with code 1"
        lines = bad.output_tail.splitlines()
        assert lines[-1] == "stderr line 59"
        assert len(lines) == 40
        assert "stderr line 19" not in lines
        assert r.failures == (bad,)
        assert r.result("head").status is SideStatus.OK


def test_a_side_failing_in_one_round_runs_in_the_next(make_side: MakeSide) -> None:
    rev, head = make_side("rev", "ok"), make_side("head", "fail-round-0")
    r0, r1 = run_rounds([rev, head], rounds=2, timeout=60)
    assert r0.result("head").status is SideStatus.FAILED
    assert "failing on round 0 only" in r0.result("head").output_tail
    assert r1.result("head").status is SideStatus.OK


def test_accepted_return_codes_are_configurable(make_side: MakeSide) -> None:
    side = make_side("rev", "fail")
    lenient = Side(side.name, side.argv, side.cwd, None, side.output, frozenset({0, 1}))
    # Exit code 1 accepted, but it wrote nothing: that is still the side's failure.
    res = run_side(lenient, 0, timeout=60)
    assert res.status is SideStatus.BAD_OUTPUT
    assert "wrote no output file" in res.message


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("garbled", "is not valid JSON"),
        ("not-a-list", "is not a JSON list of case objects"),
        ("no-output", "wrote no output file"),
    ],
)
def test_unusable_output_is_that_sides_failure(make_side: MakeSide, mode: str, words: str) -> None:
    res = run_side(make_side("rev", mode), 0, timeout=60)
    assert res.status is SideStatus.BAD_OUTPUT
    assert res.returncode == 0
    assert res.message.startswith("side 'rev', round 0: it")
    assert words in res.message


def test_a_stale_output_file_is_never_taken_for_fresh_output(make_side: MakeSide) -> None:
    side = make_side("rev", "no-output")
    stale = side.output_path(0)
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps([{"side": "rev", "round": 0}]))
    res = run_side(side, 0, timeout=60)
    assert res.status is SideStatus.BAD_OUTPUT
    assert not stale.exists()


def test_read_cases_accepts_a_list_of_objects(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text('[{"key": "a"}, {"key": "b"}]')
    assert read_cases(path) == ({"key": "a"}, {"key": "b"})


def test_hanging_side_is_killed_at_the_timeout_with_its_grandchild(
    make_side: MakeSide,
    tmp_path: Path,
) -> None:
    rev, head = make_side("rev", "hang"), make_side("head", "ok")
    (r0,) = run_rounds([rev, head], rounds=1, timeout=2.0, grace=0.5, poll=0.1)

    res = r0.result("rev")
    assert res.status is SideStatus.TIMED_OUT
    assert res.returncode is None
    assert res.message == "side 'rev', round 0: timed out after 2 s and was killed"
    child, grandchild = read_pids(tmp_path / "pids")
    assert not running(child)
    assert not running(grandchild), "the SIGTERM-ignoring grandchild survived"
    assert r0.result("head").status is SideStatus.OK


def test_grandchild_left_by_a_side_that_exited_is_killed(
    make_side: MakeSide, tmp_path: Path
) -> None:
    res = run_side(make_side("rev", "leave-grandchild"), 0, timeout=60, grace=0.5)
    assert res.status is SideStatus.OK
    child, grandchild = read_pids(tmp_path / "pids")
    assert not running(child)
    assert not running(grandchild)


def test_keyboard_interrupt_from_on_progress_kills_the_running_side(
    make_side: MakeSide,
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    seen: list[Progress] = []

    def on_progress(event: Progress) -> None:
        seen.append(event)
        if event.phase is Phase.RUNNING and pids.exists():
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_rounds(
            [make_side("rev", "hang")],
            rounds=1,
            timeout=60,
            on_progress=on_progress,
            grace=0.5,
            poll=0.05,
        )

    assert seen[0] == Progress(0, "rev", Phase.START)
    child, grandchild = read_pids(pids)
    assert not running(child)
    assert not running(grandchild)


def test_sigint_while_a_side_runs_kills_its_process_group(
    make_side: MakeSide, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"

    # An asynchronous interrupt, as from Ctrl-C: a timer signal whose handler raises
    # KeyboardInterrupt once the child and grandchild are up (it re-arms until then).
    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if pids.exists():
            raise KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, 0.05)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(KeyboardInterrupt):
            run_rounds(
                [make_side("rev", "hang"), make_side("head", "ok")], rounds=2, timeout=60, grace=0.5
            )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    child, grandchild = read_pids(pids)
    assert not running(child)
    assert not running(grandchild)


def test_progress_reports_start_and_done(make_side: MakeSide) -> None:
    seen: list[tuple[int, str, Phase]] = []
    run_rounds(
        [make_side("rev", "ok"), make_side("head", "ok")],
        rounds=2,
        timeout=60,
        on_progress=lambda e: (
            seen.append((e.round, e.side, e.phase)) if e.phase is not Phase.RUNNING else None
        ),
    )
    assert seen == [
        (0, "rev", Phase.START),
        (0, "rev", Phase.DONE),
        (0, "head", Phase.START),
        (0, "head", Phase.DONE),
        (1, "head", Phase.START),
        (1, "head", Phase.DONE),
        (1, "rev", Phase.START),
        (1, "rev", Phase.DONE),
    ]


def test_bad_arguments_are_refused(make_side: MakeSide) -> None:
    side = make_side("rev", "ok")
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        run_rounds([side], rounds=0, timeout=1)
    with pytest.raises(ValueError, match="distinct names"):
        run_rounds([side, side], rounds=1, timeout=1)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        run_side(side, 0, timeout=0)
