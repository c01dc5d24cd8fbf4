"""The plugin side of paired runs without processes: side commands, side output, pairs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Optional

import pytest

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.judging.pairstats import Decision
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.paired import more_rounds, pairdata, pairing, servers, sides
from pytest_mxperf.system import codec, cpus
from pytest_mxperf.system.sigterm import sigterm_as_interrupt
from pytest_mxperf.testing import measurement_of

KEY = CaseKey.parse("m/inference/float32/bs8/cpu")


def result(rate: float, nodeid: str = "test_a.py::test_m") -> CaseResult:
    return CaseResult(KEY, "cpu(0)", "hw", measurement=measurement_of(rate, 0.01), nodeid=nodeid)


def data(*rounds: tuple[float | None, float | None]) -> pairdata.PairedData:
    out = pairdata.PairedData("main", "a" * 40)
    for rev, head in rounds:
        out.rounds.append(
            {
                pairdata.REV: pairdata.SideResult({} if rev is None else {KEY: result(rev)}),
                pairdata.HEAD: pairdata.SideResult({} if head is None else {KEY: result(head)}),
            }
        )
    return out


def test_pairs_use_only_rounds_where_both_sides_measured() -> None:
    d = data((100.0, 90.0), (None, 91.0), (101.0, 89.0))
    got = [(a.images_per_sec or 0.0, b.images_per_sec or 0.0) for a, b in d.pairs(KEY)]
    assert [(round(a, 6), round(b, 6)) for a, b in got] == [(100.0, 90.0), (101.0, 89.0)]
    assert d.measured(pairdata.HEAD, KEY) and d.measured(pairdata.REV, KEY)


def test_block_plan_takes_the_larger_count_of_the_first_round_both_sides_measured() -> None:
    def steps(d: pairdata.PairedData, index: int, side: str, n: int) -> None:
        cases = d.rounds[index][side].cases
        measurement = cases[KEY].measurement
        assert measurement is not None
        cases[KEY] = replace(cases[KEY], measurement=replace(measurement, steps_per_block=n))

    assert pairdata.block_plan(data((100.0, None))) == {}  # one side only: nothing to share
    d = data((None, 90.0), (100.0, 91.0), (101.0, 89.0))
    steps(d, 0, pairdata.HEAD, 9)  # not a pair: not the plan's
    steps(d, 1, pairdata.REV, 4)
    steps(d, 1, pairdata.HEAD, 5)
    steps(d, 2, pairdata.REV, 7)
    assert pairdata.block_plan(d) == {KEY: 5}


def test_block_plan_is_written_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    other = CaseKey.parse("other/inference/float32/bs1/cpu")
    sides.write_plan(path, {KEY: 3, other: 12})
    assert (
        path.read_text()
        == '{"m/inference/float32/bs8/cpu": 3, "other/inference/float32/bs1/cpu": 12}'
    )
    assert sides.read_plan(path) == {KEY: 3, other: 12}
    for bad in ('{"k": true}', '{"k": 2.0}', "{", '{"k": -1}'):
        path.write_text(bad)
        with pytest.raises(ValueError, match=str(path)):
            sides.read_plan(path)


def test_earlier_results_are_written_and_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "reuse-rev.json"
    earlier = replace(result(97.5), warnings=["a warning"], window=[1.0, 2.0])
    sides.write_reuse(path, [earlier])
    assert sides.read_reuse(path) == {KEY: earlier}
    for bad in ("{", '{"cases": [{"key": 1}]}', "[]"):
        path.write_text(bad)
        with pytest.raises(ValueError, match=str(path)):
            sides.read_reuse(path)
    path.unlink()
    with pytest.raises(ValueError, match="earlier results"):
        sides.read_reuse(path)


def test_a_later_round_hands_back_only_cases_both_sides_can(tmp_path: Path) -> None:
    from pytest_mxperf.paired import rounds

    node = "test_a.py::test_m"

    def case(key: CaseKey, rate: float | None) -> CaseResult:
        if rate is None:  # measured nothing there
            return CaseResult(key, "cpu(0)", "hw", Status.ERROR, nodeid=node)
        return replace(result(rate, node), key=key)

    a, b, c = (CaseKey.parse(f"{m}/inference/float32/bs8/cpu") for m in "abc")
    d = pairdata.PairedData("main", "a" * 40)
    for _ in range(2):  # a: both sides measured it; b: REV's side errored; c: the round's case
        rev = {a: case(a, 100.0), b: case(b, None), c: case(c, 100.0)}
        head = {a: case(a, 99.0), b: case(b, 98.0), c: case(c, 90.0)}
        d.rounds.append(
            {pairdata.REV: pairdata.SideResult(rev), pairdata.HEAD: pairdata.SideResult(head)}
        )
    run = rounds._Run(
        Settings(),
        lambda _: None,
        1.0,
        lambda _: None,
        contextlib.nullcontext,
        False,
        [node],
        tmp_path,
    )
    order: list[rounds.Command] = [
        (name, sides.SideSpec(name, tmp_path), ["pytest"], tmp_path / f"{name}.json")
        for name in (pairdata.REV, pairdata.HEAD)
    ]
    got = rounds._reusing(d.rounds, order, [c], run)
    for name, _, argv, _ in got:
        assert argv is not None and argv[1:] == [
            "--mxperf-side-reuse",
            str(tmp_path / f"reuse-{name}.json"),
        ]
        handed = sides.read_reuse(tmp_path / f"reuse-{name}.json")
        assert list(handed) == [a]  # not b (measured again on both sides), not c (the round's)
        assert handed[a] == d.rounds[-1][name].cases[a]
    assert rounds._reusing(d.rounds, order, None, run) == order  # every case measured
    assert rounds._reusing(d.rounds, order, [a, b, c], run) == order  # nothing to hand back
    # The controller's results of cases it judged already go to both sides, from the first
    # round on (no rounds yet) and whatever the keys; one without a figure is measured.
    mine, failed = replace(result(97.0, node), key=a), case(b, None)
    other = replace(result(97.0, "test_b.py::test_n"), key=c)
    for keys in (None, [c]):
        got = rounds._reusing([], order, keys, run, handed=[mine, failed, other])
        for name, _, argv, _ in got:
            assert argv is not None and argv[1:3] == [
                "--mxperf-side-reuse",
                str(tmp_path / f"reuse-{name}.json"),
            ]
            assert sides.read_reuse(tmp_path / f"reuse-{name}.json") == {a: mine}


def test_estimate_needs_two_paired_rounds() -> None:
    assert data((100.0, 90.0)).estimate(KEY, 0.05) is None
    est = data((100.0, 80.0), (100.0, 80.0), (100.0, 80.0)).estimate(KEY, 0.05)
    assert est is not None and est.decision == Decision.REGRESSED
    assert est.ratio == pytest.approx(0.8)


def test_undecided_cases_and_their_node_ids() -> None:
    noisy = data((100.0, 99.0), (100.0, 90.0))
    assert pairdata.undecided(noisy, [KEY], 0.05) == [KEY]
    assert pairdata.nodeids_of(noisy, [KEY]) == ["test_a.py::test_m"]
    same = data(*[(100.0, 100.0)] * 4)  # two rounds never decide: t(0.995, 1) is 63.7
    assert pairdata.undecided(same, [KEY], 0.05) == []


def test_more_rounds_go_where_they_can_decide_or_fail_a_case_closest_first() -> None:
    slower = data((100.0, 99.0), (100.0, 90.0))
    not_slower = data((100.0, 101.0), (100.0, 110.0))
    assert pairdata.undecided(not_slower, [KEY], 0.05) == [KEY]
    assert more_rounds.worth_more_rounds(slower, [KEY], 0.05, strict=False, max_rounds=10) == [KEY]
    # Not slower, and 10 rounds of a spread like that would not decide it: a third round all the
    # same (two rounds' spread is too unsure to give up on) ...
    assert more_rounds.worth_more_rounds(not_slower, [KEY], 0.05, strict=False, max_rounds=10) == [
        KEY
    ]
    # ... and no more after it, unless an undecided case fails the run (rounds 16% apart: about
    # 26 would rule out a 5% loss).
    not_slower_3 = data((100.0, 101.0), (100.0, 118.0), (100.0, 85.0))
    assert (
        more_rounds.worth_more_rounds(not_slower_3, [KEY], 0.05, strict=False, max_rounds=10) == []
    )
    assert more_rounds.worth_more_rounds(not_slower_3, [KEY], 0.05, strict=True, max_rounds=10) == [
        KEY
    ]
    decided = data(*[(100.0, 100.0)] * 4)
    assert more_rounds.worth_more_rounds(decided, [KEY], 0.05, strict=True, max_rounds=10) == []
    # About -1% with rounds 7% apart: it could never fail in 10 rounds, but 10 would decide it
    # (the same, within 5%), so it gets them; with rounds 19% apart neither, so it stops at 3
    # (inconclusive) unless an undecided case fails the run.
    swinging = data((100.0, 92.0), (100.0, 105.0), (100.0, 100.0))
    assert more_rounds.worth_more_rounds(swinging, [KEY], 0.05, strict=False, max_rounds=10) == [
        KEY
    ]
    assert more_rounds.worth_more_rounds(swinging, [KEY], 0.05, strict=False, max_rounds=6) == []
    wild = data((100.0, 80.0), (100.0, 118.0), (100.0, 100.0))
    assert more_rounds.worth_more_rounds(wild, [KEY], 0.05, strict=False, max_rounds=10) == []
    assert more_rounds.worth_more_rounds(wild, [KEY], 0.05, strict=True, max_rounds=10) == [KEY]
    # Rounds that were run count against the limit, those a side failed in too.
    assert more_rounds.worth_more_rounds(slower, [KEY], 0.05, strict=False, max_rounds=2) == []
    assert more_rounds.worth_more_rounds(slower, [KEY], 0.05, strict=True, max_rounds=2) == []


def fixed(threshold: float | None) -> more_rounds.Clears:
    """Every case's stored threshold is ``threshold``."""
    return lambda _: threshold


def test_a_case_arbitrated_at_a_wider_stored_threshold_gets_the_rounds_that_would_clear_it() -> (
    None
):
    # Rounds 16% apart, no slower on average: about 26 rounds would rule out a 5% loss, so the
    # rounds stop at 3 ...
    swings = data((100.0, 101.0), (100.0, 118.0), (100.0, 85.0))
    assert more_rounds.worth_more_rounds(swings, [KEY], 0.05, strict=False, max_rounds=10) == []
    # ... but its arbitration clears it once a loss of its stored threshold is ruled out: 18%
    # takes about 4 rounds, 10% about 9; both fit in 10.
    for threshold, rounds in ((0.18, 4), (0.10, 9)):
        est = swings.estimate(KEY, 0.05)
        assert est is not None
        assert more_rounds.clear_rounds(swings, KEY, threshold, est) == rounds
        got = more_rounds.worth_more_rounds(
            swings, [KEY], 0.05, strict=False, max_rounds=10, clears=fixed(threshold)
        )
        assert got == [KEY]
    # Not when the rounds would not fit, when the loss is ruled out already (25%), when the
    # threshold is the minimum effect, or when the case has no stored threshold.
    none: list[tuple[int, float | None]] = [(6, 0.10), (10, 0.25), (10, 0.05), (10, None)]
    for limit, wide in none:
        got = more_rounds.worth_more_rounds(
            swings, [KEY], 0.05, strict=False, max_rounds=limit, clears=fixed(wide)
        )
        assert got == [], (limit, wide)
    # It only adds rounds: a slower case the minimum effect keeps stays.
    slower = data((100.0, 99.0), (100.0, 90.0))
    assert more_rounds.worth_more_rounds(
        slower, [KEY], 0.05, strict=False, max_rounds=10, clears=fixed(0.30)
    ) == [KEY]


def test_a_case_measured_again_after_its_own_pair_keeps_its_rounds_up_to_the_cap() -> None:
    # Rounds 16% apart, no slower on average: about 26 rounds would decide, so a pair stops at 3
    # ... but a joint pair measuring it again after its own pair (those rounds `earlier`) keeps
    # it up to the cap, its own rounds counted.
    rounds = ((100.0, 101.0), (100.0, 118.0), (100.0, 85.0))
    swings = data(*rounds)
    assert more_rounds.worth_more_rounds(swings, [KEY], 0.05, strict=False, max_rounds=10) == []
    again = data(*rounds[2:])
    again.earlier = {KEY: swings.pairs(KEY)[:2]}
    assert again.pairs(KEY) == swings.pairs(KEY)
    assert more_rounds.worth_more_rounds(again, [KEY], 0.05, strict=False, max_rounds=10) == [KEY]
    assert more_rounds.worth_more_rounds(again, [KEY], 0.05, strict=False, max_rounds=3) == []
    # Not once its arbitration clears it (a 25% stored threshold is ruled out already).
    assert (
        more_rounds.worth_more_rounds(
            again, [KEY], 0.05, strict=False, max_rounds=10, clears=fixed(0.25)
        )
        == []
    )


def test_the_case_closest_to_a_decision_comes_first() -> None:
    other = CaseKey.parse("n/inference/float32/bs8/cpu")
    d = data((100.0, 92.0), (100.0, 105.0), (100.0, 100.0))  # about 10 rounds from deciding
    for rnd, head in zip(d.rounds, (103.0, 96.0, 100.5)):  # about 4 rounds from deciding
        rnd[pairdata.REV].cases[other] = result(100.0, "test_a.py::test_n")
        rnd[pairdata.HEAD].cases[other] = result(head, "test_a.py::test_n")
    near, far = d.estimate(other, 0.05), d.estimate(KEY, 0.05)
    assert near is not None and far is not None
    assert near.suggested_rounds is not None and far.suggested_rounds is not None
    assert near.suggested_rounds < far.suggested_rounds <= 10
    got = more_rounds.worth_more_rounds(d, [KEY, other], 0.05, strict=False, max_rounds=10)
    assert got == [other, KEY]


def test_side_command_runs_this_plugin_on_the_side_tree(tmp_path: Path) -> None:
    side = sides.SideSpec(pairdata.REV, tmp_path / "wt")
    args = sides.side_args(
        side, Settings(min_time=1.0, max_time=5.0), ["t.py"], tmp_path / "o", tmp_path / "s"
    )
    argv = sides.side_command(side, args)
    assert argv[:2] == [side.python, "-c"]
    assert "sys.path.insert(0" in argv[2] and "pytest_mxperf.plugin" in argv[2]
    assert argv[argv.index("--rootdir") + 1] == str(tmp_path / "wt")
    assert argv[argv.index("--mxperf-min-time") + 1] == "0.3"
    assert argv[argv.index("--mxperf-max-time") + 1] == "0.3"  # stops there, stable or not
    assert argv[argv.index("--mxperf-seed") + 1] == "0"  # both sides draw the same numbers
    assert argv[argv.index("--mxperf-pair-cpus") + 1] == "off"  # pinned by the controller
    off = sides.side_args(side, Settings(seed=None), ["t.py"], tmp_path / "o", tmp_path / "s")
    assert off[off.index("--mxperf-seed") + 1] == "off"
    assert "--continue-on-collection-errors" in argv and argv[-1] == "t.py"


def test_side_environment_cannot_pair_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_MXPERF_AB", "main")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-n 2")
    monkeypatch.setenv("PYTEST_MXPERF_THREADS", "1")
    env = sides.side_env()
    assert "PYTEST_MXPERF_AB" not in env and "PYTEST_ADDOPTS" not in env
    assert env["PYTEST_MXPERF_THREADS"] == "1"


def test_read_side_reports_missing_or_garbled_output(tmp_path: Path) -> None:
    assert "no results" in (sides.read_side(tmp_path / "none.json").error or "")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "no results" in (sides.read_side(bad).error or "")
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps({"cases": [codec.to_dict(result(50.0))], "collect_errors": [["t.py", "boom"]]})
    )
    side = sides.read_side(good)
    assert side.error is None and side.cases[KEY].images_per_sec == pytest.approx(50.0)
    assert side.collect_errors == [("t.py", "boom")]


def test_side_failures_name_the_file_of_the_case() -> None:
    d = data((None, 100.0))
    d.rounds[0][pairdata.REV].collect_errors = [("a.py", "ImportError: x"), ("b.py", "other")]
    assert d.side_failures(pairdata.REV, "a.py::test_m") == ["a.py: ImportError: x"]
    assert len(d.side_failures(pairdata.REV)) == 2


@pytest.mark.parametrize(
    ("usable", "pin", "gpu", "overlap", "spread"),
    [
        ({0, 1}, "1", False, True, {0, 1}),  # set up on both CPUs, time on CPU 1
        ({0, 1}, "1", True, False, None),  # a GPU run: setups one after the other
        ({0, 1}, "off", False, True, None),  # unpinned: the scheduler spreads them
        ({0, 1}, "0-1", False, False, None),  # pinned to all: no CPU to spare
        ({0}, "off", False, False, None),  # one CPU: nothing to gain
    ],
)
def test_sides_set_up_at_once_only_on_cpu_runs_with_a_cpu_to_spare(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    usable: set[int],
    pin: str,
    gpu: bool,
    overlap: bool,
    spread: set[int] | None,
) -> None:
    monkeypatch.setattr(cpus, "available", lambda: frozenset(usable))
    pairer = pairing.Pairer(Settings(pair_cpus=pin), tmp_path, tmp_path, overlap=not gpu)
    assert pairer.overlap is overlap
    assert pairer.spread == (None if spread is None else frozenset(spread))


class RecordedServer:
    """Stands in for `forkserver.ForkServer`: records how each was started and waited for."""

    log: ClassVar[list[tuple[str, object]]] = []

    def __init__(
        self,
        env: dict[str, str],
        cpus: frozenset[int] | None = None,
        import_cpus: frozenset[int] | None = None,
        wait: bool = True,
    ) -> None:
        self.log.append(("start", (cpus, import_cpus, wait)))

    def wait_ready(self) -> None:
        self.log.append(("wait", None))

    def alive(self) -> bool:
        return True

    def close(self) -> None:
        pass


# Optional, not ``X | None``: evaluated at import, and Python 3.9 has no ``|`` between types.
Start = tuple[Optional[set[int]], Optional[set[int]]]


@pytest.mark.parametrize(
    ("usable", "pin", "started", "at_once"),
    [
        # On the timing CPU and on the other at once, both then on CPU 1; waited for after.
        ({0, 1}, "1", [({1}, {1}), ({1}, {0})], True),
        # No CPU to spare: the second starts once the first is ready.
        ({1}, "1", [({1}, None), ({1}, None)], False),
        ({0, 1}, "0-1", [({0, 1}, None), ({0, 1}, None)], False),
        # Not pinned: both at once, anywhere.
        ({0, 1}, "off", [(None, None), (None, None)], True),
    ],
)
def test_both_sides_fork_servers_start_at_once_where_each_can_import_on_cpus_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    usable: set[int],
    pin: str,
    started: list[Start],
    at_once: bool,
) -> None:
    monkeypatch.setattr(cpus, "available", lambda: frozenset(usable))
    monkeypatch.setattr(servers, "ForkServer", RecordedServer)
    monkeypatch.setattr(RecordedServer, "log", [])
    pairer = pairing.Pairer(Settings(pair_cpus=pin), tmp_path, tmp_path, overlap=True)

    def start(c: set[int] | None, i: set[int] | None) -> tuple[str, object]:
        return (
            "start",
            (None if c is None else frozenset(c), None if i is None else frozenset(i), False),
        )

    # At the session's start nothing waits; a server asked for waits for what was started.
    pairer.start_servers()
    assert RecordedServer.log == [start(*started[0]), *([start(*started[1])] if at_once else [])]
    assert pairer.server(pairdata.HEAD) is not None and pairer.server(pairdata.REV) is not None
    wait = ("wait", None)
    expected = (
        [start(*started[0]), start(*started[1]), wait, wait]
        if at_once
        else [start(*started[0]), wait, start(*started[1]), wait]
    )
    assert RecordedServer.log == expected
    pairer.close()


def test_a_server_asked_for_first_starts_both(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cpus, "available", lambda: frozenset({0, 1}))
    monkeypatch.setattr(servers, "ForkServer", RecordedServer)
    monkeypatch.setattr(RecordedServer, "log", [])
    pairer = pairing.Pairer(Settings(pair_cpus="1"), tmp_path, tmp_path, overlap=True)
    assert pairer.server(pairdata.REV) is not None
    assert [what for what, _ in RecordedServer.log] == ["start", "start", "wait", "wait"]
    assert pairer.server(pairdata.HEAD) is not None
    assert len(RecordedServer.log) == 4  # started once
    pairer.close()


def test_a_process_forked_during_a_paired_run_ends_on_sigterm() -> None:
    """The controller turns SIGTERM into KeyboardInterrupt; what it forks (a DataLoader's
    worker pool in a test body) gets the default back, so ``Pool.terminate`` ends it."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a signal handler is set in the main thread only")
    before = signal.getsignal(signal.SIGTERM)
    if before is not signal.SIG_DFL:
        pytest.skip("SIGTERM already has a handler here")
    with sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        pid = os.fork()
        if pid == 0:  # the child: wait to be ended
            try:
                time.sleep(30)
            finally:
                os._exit(3)
        time.sleep(0.2)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_child_signalled_before_its_fork_hook_ends_as_sigterm_ends_it() -> None:
    """SIGTERM can reach a forked child before the hook that resets its handler runs (a pool
    terminated right after its fork): the controller's handler then ends the child too."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a signal handler is set in the main thread only")
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM already has a handler here")
    with sigterm_as_interrupt():
        handler = signal.getsignal(signal.SIGTERM)
        pid = os.fork()
        if pid == 0:  # the child, with the controller's handler as before the hook ran
            try:
                signal.signal(signal.SIGTERM, handler)
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            finally:
                os._exit(3)
        _, status = os.waitpid(pid, 0)
        # ... while the controller itself still turns SIGTERM into KeyboardInterrupt.
        with pytest.raises(KeyboardInterrupt, match="signal 15"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


def test_a_case_cleared_at_its_stored_threshold_gets_more_rounds_only_to_find_a_loss() -> None:
    # About +0.3% with rounds 3.5% apart: a few more rounds would find it the same within 5%,
    # which a pair alone is given them for ...
    steady = data((100.0, 101.0), (100.0, 96.5), (100.0, 103.5))
    assert more_rounds.worth_more_rounds(steady, [KEY], 0.05, strict=False, max_rounds=10) == [KEY]
    # ... but its arbitration at a 30% stored threshold passes already: no more rounds, under
    # --mxperf-strict too (a cleared case is no longer undecided).
    for strict in (False, True):
        got = more_rounds.worth_more_rounds(
            steady, [KEY], 0.05, strict=strict, max_rounds=10, clears=fixed(0.30)
        )
        assert got == [], strict
    # Measured slower, it keeps them while rounds could still find a loss of 5% ...
    slower = data((100.0, 97.0), (100.0, 92.0), (100.0, 99.0))
    est = slower.estimate(KEY, 0.05)
    assert est is not None and est.rules_out_wider(0.30) and est.ratio < 1.0
    assert more_rounds.worth_more_rounds(
        slower, [KEY], 0.05, strict=False, max_rounds=10, clears=fixed(0.30)
    ) == [KEY]
    # ... and not when they could not (two rounds left) ...
    assert more_rounds.could_still_regress(est, 7)
    assert not more_rounds.could_still_regress(est, 1)
    # ... nor when only the estimate moved one standard error towards a loss could: its
    # verdict is taken (-3.8% in 4 rounds 4.3% apart; an undecided case would keep them).
    wanders = data((100.0, 96.0), (100.0, 101.0), (100.0, 91.0), (100.0, 97.0))
    est = wanders.estimate(KEY, 0.05)
    assert est is not None and est.rules_out_wider(0.30)
    assert more_rounds.could_still_regress(est, 6)
    assert not more_rounds.could_still_regress(est, 6, shifted=False)
    assert (
        more_rounds.worth_more_rounds(
            wanders, [KEY], 0.05, strict=False, max_rounds=10, clears=fixed(0.30)
        )
        == []
    )
    assert (
        more_rounds.worth_more_rounds(
            slower, [KEY], 0.05, strict=False, max_rounds=4, clears=fixed(0.30)
        )
        == []
    )


@pytest.mark.parametrize("budgeted", [True, False])
def test_a_second_run_spends_none_of_the_budget_later_suspects_need(
    monkeypatch: pytest.MonkeyPatch, budgeted: bool
) -> None:
    # Rounds on a fake clock (5 s each): two first rounds, then two extra rounds the case is
    # worth. A run's first pair (budgeted) counts them against --mxperf-pair-budget; a
    # regression's second run (not budgeted) is bounded by its rounds and counts none of them,
    # so the next suspect's pair keeps the budget its extra rounds need.
    now = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    worth = iter([[KEY], [KEY], []])
    monkeypatch.setattr(pairing, "worth_more_rounds", lambda *args: next(worth))
    monkeypatch.setattr(pairing, "nodeids_of", lambda data, keys: ["test_a.py::test_m"])
    rounds: list[int] = []

    def run(nodeids: list[str], count: int, **kwargs: object) -> None:
        rounds.append(count)
        now[0] += 5.0 * count

    pairer: Any = pairing.Pairer.__new__(pairing.Pairer)
    pairer.settings = Settings(enabled=True, rounds=2, max_rounds=10)
    pairer.first_seconds = pairer.extra_seconds = 0.0
    monkeypatch.setattr(pairer, "_runner", lambda *args, **kwargs: run, raising=False)
    paired = data()
    pairer._rounds(paired, {}, ["test_a.py::test_m"], print, None, budgeted)
    assert rounds == [2, 1, 1]  # the second run's extra rounds are not cut short either
    assert (pairer.first_seconds, pairer.extra_seconds) == ((10.0, 10.0) if budgeted else (0, 0))
    assert not paired.budget_spent
