"""The rounds of a paired run: REV's and HEAD's sides measured in alternating order, round after
round, until every case is decided or the rounds run out; how a round's side processes run (one
by one, or in lock-step together) is `siderun`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from pytest_mxperf.config import sideorders
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.paired.forkserver import ForkServer
from pytest_mxperf.paired.pairdata import HEAD, REV, PairedData, SideResult, block_plan
from pytest_mxperf.paired.siderun import round_tmp, run_side, run_together
from pytest_mxperf.paired.sides import SideSpec, read_side, side_args, write_plan, write_reuse
from pytest_mxperf.system import procgroup, scratch


def run_rounds(
    data: PairedData,
    sides_: dict[str, SideSpec],
    settings: Settings,
    nodeids: Sequence[str],
    rounds: int,
    progress: Callable[[str], None] = lambda _: None,
    timeout: float = 3600.0,
    profile: bool = False,
    server: Callable[[str], ForkServer | None] = lambda _: None,
    hold: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
    overlap: bool = False,
    keys: Sequence[CaseKey] | None = None,
    earlier: PairedData | None = None,
    handed: Sequence[CaseResult] = (),
) -> None:
    """Add ``rounds`` rounds to ``data``: REV first on even rounds, HEAD first on odd ones, each
    side one process serving every node id of the round.

    With ``profile`` the sides also profile every case after measuring it
    (``--mxperf-side-profile``) and the round goes to ``data.profile_rounds``, not to the
    evidence. With ``--mxperf-profile`` (every case's trace asked for) the first round profiles
    instead, and its HEAD side writes the traces.

    ``server`` gives the fork server that starts a side (None: each side is a fresh process
    of its ``python``). With ``settings.pair_lockstep`` both sides of a measuring round run at once
    and take turns (`pytest_mxperf.paired.turns`; profiling rounds run one side after the other),
    the controller inside ``hold()`` for the round: the session's device locks (the CPU's and
    every GPU's the run sees), so no other run measures on them meanwhile. With ``overlap`` the
    sides of such a round do their untimed work at once (`turns.Conductor`).

    ``keys``: the cases these rounds are for (None: every case of ``nodeids``); the sides get
    back their other cases' earlier results, and ``handed``'s, instead of measuring them
    (`_reusing`). ``earlier``: a paired run of the same sides whose rounds came before
    ``data``'s (the first run of a regression's second run), whose results count as earlier."""
    with scratch.directory("pair", round_tmp()) as tmp:
        run = _Run(settings, progress, timeout, server, hold, overlap, nodeids, Path(tmp))
        todo = list(nodeids)
        commands = _commands(sides_, run, todo)
        for _ in range(rounds):
            index = len(data.rounds)
            traces = bool(settings.profile) and index == 0 and not profile
            order = _planned(data, commands if index % 2 == 0 else commands[::-1], run.tmp)
            done = [*(earlier.rounds if earlier else []), *data.rounds]
            order = _reusing(done, order, keys, run, handed)
            started = time.monotonic()
            this, ended = _round(data, order, run, profile, traces)
            (data.profile_rounds if profile else data.rounds).append(this)
            if not profile:
                data.round_seconds.append(time.monotonic() - started)
            if profile or traces:
                continue
            # What REV has nothing to pair with (no such test there, or a file it cannot
            # collect) is measured once at HEAD, not once a round.
            alone = unpaired(data, todo) if ended.get(REV) and ended.get(HEAD) else set()
            if alone:
                todo = [n for n in todo if n not in alone]
                if not todo:
                    break
                commands = _commands(sides_, run, todo)


#: A side of a round: (REV or HEAD, its spec, its command line or None, its results file).
Command = tuple[str, SideSpec, Optional[list[str]], Path]


@dataclass(frozen=True)
class _Run:
    """What every round of one `run_rounds` call shares."""

    settings: Settings
    progress: Callable[[str], None]
    timeout: float
    server: Callable[[str], ForkServer | None]
    hold: Callable[[], contextlib.AbstractContextManager[None]]
    overlap: bool
    nodeids: Sequence[str]
    tmp: Path


def _commands(sides_: dict[str, SideSpec], run: _Run, ids: Sequence[str]) -> list[Command]:
    """Each side's command line for the node ids ``ids`` (None where none of their files
    exists on that side), the ids written to the round's selection file."""
    select = run.tmp / "select.txt"
    select.write_text("\n".join(ids) + "\n", encoding="utf-8")
    files = sorted({n.split("::")[0] for n in ids})
    commands = []
    for name in (REV, HEAD):
        side = sides_[name]
        present = [f for f in files if (side.rootdir / f).exists()]
        out = run.tmp / f"{name}.json"
        argv = side_args(side, run.settings, present, out, select) if present else None
        commands.append((name, side, argv, out))
    return commands


def _planned(data: PairedData, order: list[Command], tmp: Path) -> list[Command]:
    """``order`` with the block plan of the rounds so far: both sides time the same steps per
    block as in their first round."""
    plan, with_plan, plan_path = block_plan(data), [], tmp / "plan.json"
    if plan:
        write_plan(plan_path, plan)
        with_plan = [sideorders.PLAN, str(plan_path)]
    return [(n, side, None if a is None else [*a, *with_plan], out) for n, side, a, out in order]


def _reusing(
    done: Sequence[dict[str, SideResult]],
    order: list[Command],
    keys: Sequence[CaseKey] | None,
    run: _Run,
    handed: Sequence[CaseResult] = (),
) -> list[Command]:
    """``order`` with each side's earlier results of the cases not among ``keys`` (the last of
    the ``done`` rounds each side measured them in), handed back to their calls instead of
    measuring them again (None: every case is measured but those ``handed``). Both sides skip
    the same cases, so that no round shows a case one side measured and the other did not
    (`PairedData.broken`): a case is measured again unless each side either has a result with a
    figure or never measured it. The controller's ``handed`` results (with a figure) are handed
    back to both sides, whatever ``keys`` is: the cases a test judged before the one an
    arbitration pairs, so that pair times that case and those after it (which may be suspected
    too and take the same pair), not the test whole; a test of several cases is not timed whole
    for one of them."""
    ids = set(run.nodeids)
    given = {c.key: c for c in handed if c.nodeid in ids and c.status == Status.OK}
    if keys is None and not given:
        return order
    last: dict[str, dict[CaseKey, CaseResult]] = {name: dict(given) for name, *_ in order}
    for r in done:  # oldest first: the last round a side measured a case in wins
        for name, found in last.items():
            found.update((k, c) for k, c in r[name].cases.items() if c.nodeid in ids)
    candidates = {k for found in last.values() for k in found} - set(keys or ())
    skipped = {
        k
        for k in candidates
        if k in given
        or (
            keys is not None
            and all(k not in found or found[k].status == Status.OK for found in last.values())
        )
    }
    out = []
    for name, side, argv, path in order:
        earlier = [c for k, c in last[name].items() if k in skipped]
        if argv is not None and earlier:
            reuse = run.tmp / f"reuse-{name}.json"
            write_reuse(reuse, earlier)
            argv = [*argv, sideorders.REUSE, str(reuse)]
        out.append((name, side, argv, path))
    return out


def _round(
    data: PairedData, order: list[Command], run: _Run, profile: bool, traces: bool
) -> tuple[dict[str, SideResult], dict[str, bool]]:
    """One round's sides run (in lock-step together where they may, else one by one): each
    side's results, and whether its process ended as pytest does and wrote them."""
    settings = run.settings
    this: dict[str, SideResult] = {}
    finished: dict[str, procgroup.Finished] = {}
    ended: dict[str, bool] = {}
    together = (
        settings.pair_lockstep
        and not (profile or traces)
        and all(argv is not None for _, _, argv, _ in order)
    )
    what = "profile" if profile else f"round {len(data.rounds) + 1}"
    if together:
        for name, _, _, out in order:  # both start now, and take turns
            run.progress(f"{what}, {data.side_label(name)}")
            out.unlink(missing_ok=True)
        both = [(n, side, argv, out) for n, side, argv, out in order if argv is not None]
        finished = run_together(
            both, run.server, run.timeout, run.nodeids, run.tmp, run.hold, overlap=run.overlap
        )
    for name, side, argv, out in order:
        if argv is None:
            this[name] = SideResult()  # none of the files exists on that side
            ended[name] = True
            continue
        if name in finished:
            done = finished[name]
        else:
            run.progress(f"{what}, {data.side_label(name)}")
            out.unlink(missing_ok=True)
            if profile or traces:
                argv = [*argv, sideorders.PROFILE]
                if name == HEAD and settings.profile:
                    argv += ["--mxperf-profile", str(Path(settings.profile).resolve())]
            done = run_side(side, argv, run.server(name), run.timeout)
        this[name] = side_outcome(read_side(out), done, run.timeout)
        # pytest's own endings (0, 1: a test failed) with the side's results written.
        ended[name] = this[name].error is None and done.returncode in (0, 1)
        ended[name] = ended[name] and not done.timed_out
    return this, ended


def unpaired(data: PairedData, nodeids: Sequence[str]) -> set[str]:
    """Node ids whose cases HEAD's side measured in the last round while REV's side, in every
    round so far, had none of them: more rounds pair nothing for them."""
    last = data.rounds[-1]
    rev_keys = {k for r in data.rounds for k in r[REV].cases}
    by_node: dict[str, set[CaseKey]] = {}
    for key, case in last[HEAD].cases.items():
        by_node.setdefault(case.nodeid, set()).add(key)
    return {n for n in nodeids if n in by_node and not by_node[n] & rev_keys}


#: Lines of a failed side's output its cases' messages show.
SIDE_TAIL_LINES = 15


def side_outcome(result: SideResult, done: procgroup.Finished, timeout: float) -> SideResult:
    """``result`` as read from a side's file, or a copy saying why it has nothing when the
    process failed to start or died (no file, or killed before a case): how it ended and the
    last lines of its output (a missing module in REV's environment, a crash), not only "no
    results"."""
    # pytest exits 1 when a test failed: the side's JSON still holds its cases.
    failed = done.timed_out or done.returncode not in (0, 1)
    if result.cases or not (failed or result.error):
        return result
    how = done.describe(timeout)
    text = f"the side process {how} and wrote no results"
    tail = done.tail.rstrip().splitlines()[-SIDE_TAIL_LINES:]
    if tail:
        text += "; the last lines of its output:\n" + "\n".join(tail)
    return replace(result, error=text)
