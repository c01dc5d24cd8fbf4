"""Paired runs, plugin side: measure REV's code and the working tree in alternating rounds, each
side a pytest process of its own, whose results `pairdata` holds.

The side processes run the same node ids with ``--mxperf-side-out``; they import this installed
plugin (put first on ``sys.path``), not a copy from REV's tree, so both sides measure the same
way and only the repository's code differs (or, with ``--mxperf-env-command``, also REV's
environment).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest_mxperf
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.paired import envs, forkserver, turns, worktree
from pytest_mxperf.paired.forkserver import ForkServer, ForkServerError
from pytest_mxperf.paired.pairdata import (
    HEAD,
    REV,
    PairedData,
    SideResult,
    block_plan,
    case_keys,
    nodeids_of,
    regressed,
    worth_more_rounds,
)
from pytest_mxperf.system import cpus as cpu_sets
from pytest_mxperf.system import procgroup

#: Runs pytest in a side process with this installed plugin importable first.
BOOTSTRAP = (
    "import sys; sys.path.insert(0, {root!r}); import pytest_mxperf.plugin, pytest; "
    "sys.exit(pytest.main(sys.argv[1:]))"
)
#: Per-side timed-block time as a share of a plain run's ``--mxperf-min-time``: every case is
#: measured 2 x rounds times, and the rounds' spread is mostly between processes (2-4% here),
#: which longer blocks within one process do not shrink. A side also stops there when its
#: blocks disagree (a plain run goes on up to ``--mxperf-max-time``): the pair's interval
#: takes the blocks' spread into account.
SIDE_TIME_SHARE = 0.3


@dataclass(frozen=True)
class SideSpec:
    """Where a side's code lives and which Python runs it."""

    name: str
    rootdir: Path
    python: str = sys.executable
    #: The whole environment of the side's processes (None: this one, see `side_env`).
    env: dict[str, str] | None = None
    #: The CPUs its processes are pinned to (None: not pinned); the same for both sides.
    cpus: frozenset[int] | None = None
    #: Wider CPUs for its untimed work where lock-step sides set up at once (None: ``cpus``).
    spread: frozenset[int] | None = None


def side_command(side: SideSpec, args: Sequence[str]) -> list[str]:
    """A fresh process of ``side.python`` running ``pytest args`` with this plugin first."""
    plugin_root = str(Path(pytest_mxperf.__file__).resolve().parent.parent)
    return [side.python, "-c", BOOTSTRAP.format(root=plugin_root), *args]


def side_args(
    side: SideSpec, settings: Settings, files: Sequence[str], out: Path, select: Path
) -> list[str]:
    """The pytest arguments of one side: ``files`` under ``side.rootdir``, measured the side's
    way and written to ``out``."""
    min_time = settings.min_time * SIDE_TIME_SHARE
    return [
        "--rootdir",
        str(side.rootdir),
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-q",
        "--continue-on-collection-errors",
        "--mxperf-side-out",
        str(out),
        "--mxperf-side-select",
        str(select),
        "--mxperf-min-time",
        str(min_time),
        "--mxperf-max-time",
        str(min_time),
        "--mxperf-warmup-time",
        str(settings.warmup_time),
        *files,
    ]


def side_env() -> dict[str, str]:
    """The environment of a side: this one, without what would make it pair again or write."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    for name in ("AB", "JSON", "ARBITRATE", "COMPARE", "ENV_COMMAND", "PROFILE"):
        env.pop(f"PYTEST_MXPERF_{name}", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def write_plan(path: Path, plan: dict[str, int]) -> None:
    """The block plan of a round's sides (`pairdata.block_plan`), read by `read_plan`."""
    path.write_text(json.dumps(plan, sort_keys=True), encoding="utf-8")


def read_plan(path: Path) -> dict[str, int]:
    """Case key -> steps per timed block, as `write_plan` wrote it.

    :raises ValueError: the file is missing or is not such a mapping (the message names it).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the paired run's block plan {path}: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and type(v) is int and v >= 1 for k, v in data.items()
    ):
        raise ValueError(
            f"the paired run's block plan {path} is not a mapping of case keys to steps >= 1"
        )
    return data


def read_side(path: Path) -> SideResult:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        cases = {str(c["key"]): CaseResult.from_dict(c) for c in data["cases"]}
        errors = [(str(n), str(t)) for n, t in data.get("collect_errors", [])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return SideResult(error=f"no results from the side process ({exc})")
    return SideResult(cases, errors)


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
    sides of such a round do their untimed work at once (`turns.Conductor`)."""
    files = sorted({n.split("::")[0] for n in nodeids})
    with tempfile.TemporaryDirectory(prefix="mxperf-pair-", dir=_round_tmp()) as tmp:
        select = Path(tmp) / "select.txt"
        select.write_text("\n".join(nodeids) + "\n", encoding="utf-8")
        commands = []
        for name in (REV, HEAD):
            side = sides_[name]
            present = [f for f in files if (side.rootdir / f).exists()]
            out = Path(tmp) / f"{name}.json"
            argv = side_args(side, settings, present, out, select) if present else None
            commands.append((name, side, argv, out))
        for _ in range(rounds):
            index = len(data.rounds)
            traces = bool(settings.profile) and index == 0 and not profile
            order = commands if index % 2 == 0 else commands[::-1]
            plan, with_plan, plan_path = block_plan(data), [], Path(tmp) / "plan.json"
            if plan:  # both sides time the same steps per block as in their first round
                write_plan(plan_path, plan)
                with_plan = ["--mxperf-side-plan", str(plan_path)]
            order = [
                (n, side, None if a is None else [*a, *with_plan], out) for n, side, a, out in order
            ]
            this: dict[str, SideResult] = {}
            finished: dict[str, procgroup.Finished] = {}
            together = (
                settings.pair_lockstep
                and not (profile or traces)
                and all(argv is not None for _, _, argv, _ in order)
            )
            what = "profile" if profile else f"round {index + 1}"
            if together:
                for name, _, _, out in order:  # both start now, and take turns
                    progress(f"{what}, {data.side_label(name)}")
                    out.unlink(missing_ok=True)
                both = [(n, side, argv, out) for n, side, argv, out in order if argv is not None]
                finished = _run_together(
                    both, server, timeout, nodeids, Path(tmp), hold, overlap=overlap
                )
            for name, side, argv, out in order:
                if argv is None:
                    this[name] = SideResult()  # none of the files exists on that side
                    continue
                if name in finished:
                    done = finished[name]
                else:
                    progress(f"{what}, {data.side_label(name)}")
                    out.unlink(missing_ok=True)
                    if profile or traces:
                        argv = [*argv, "--mxperf-side-profile"]
                        if name == HEAD and settings.profile:
                            argv += ["--mxperf-profile", str(Path(settings.profile).resolve())]
                    done = _run_side(side, argv, server(name), timeout)
                result = read_side(out)
                # pytest exits 1 when a test failed: the side's JSON still holds its cases.
                failed = done.timed_out or done.returncode not in (0, 1)
                if failed and not result.cases:
                    result.error = f"the side process {done.describe(timeout)}:\n{done.tail}"
                this[name] = result
            (data.profile_rounds if profile else data.rounds).append(this)


#: The longest path a Unix socket may bind (108 bytes on Linux, 104 on macOS).
_SOCKET_PATH_MAX = 104


def _round_tmp() -> str | None:
    """Where a round's temporary directory goes: the usual place, unless a lock-step socket
    in it (``<tmp>/mxperf-pair-XXXXXXXX/turns.sock``) would be too long a path to bind (a deep
    TMPDIR), then ``/tmp``."""
    usual = tempfile.gettempdir()
    fits = len(os.fsencode(usual)) + len("/mxperf-pair-XXXXXXXX/turns.sock") < _SOCKET_PATH_MAX
    return None if fits or not Path("/tmp").is_dir() else "/tmp"


def _run_side(
    side: SideSpec,
    args: list[str],
    server: ForkServer | None,
    timeout: float,
    cancelled: threading.Event | None = None,
) -> procgroup.Finished:
    """One side process, bounded; with ``cancelled`` (a side run from a thread) it ends as soon
    as that is set, and is not restarted as a fresh process then."""
    if server is not None:
        try:
            return server.run(args, cwd=side.rootdir, timeout=timeout)
        except ForkServerError:  # a server gone wrong: a fresh process
            if cancelled is not None and cancelled.is_set():
                return procgroup.Finished(-signal.SIGINT, False, 0.0, "cancelled")

    def tick(_: float) -> None:
        if cancelled is not None and cancelled.is_set():
            raise KeyboardInterrupt

    return procgroup.run_bounded(
        side_command(side, args),
        cwd=side.rootdir,
        env=side.env or side_env(),
        timeout=timeout,
        cpus=side.cpus,
        poll=0.1,
        on_tick=tick,
    )


#: Seconds a lock-step round waits for its sides beyond their own time limit.
_TOGETHER_GRACE = 30.0


def _run_together(
    order: Sequence[tuple[str, SideSpec, list[str], Path]],
    server: Callable[[str], ForkServer | None],
    timeout: float,
    nodeids: Sequence[str],
    tmp: Path,
    hold: Callable[[], contextlib.AbstractContextManager[None]],
    overlap: bool = False,
) -> dict[str, procgroup.Finished]:
    """Both sides of a round at once, taking turns through a `turns.Conductor` on a Unix socket
    in ``tmp``; each side a thread-run process as `_run_side` runs it, this process inside
    ``hold()`` (the device locks; the sides take none). With ``overlap`` their untimed work may
    run at once, on each side's ``spread`` CPUs.
    Whatever ends the wait (KeyboardInterrupt included), both sides are gone when this returns
    or raises."""
    path = tmp / "turns.sock"
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(2)
    conductor = turns.Conductor((order[0][0], order[1][0]), nodeids, overlap=overlap)
    cancelled = threading.Event()
    finished: dict[str, procgroup.Finished] = {}
    errors: list[BaseException] = []
    servers = {name: server(name) for name, _, _, _ in order}

    def body(name: str, side: SideSpec, argv: list[str]) -> None:
        try:
            args = [*argv, "--mxperf-side-turns", f"{name}={path}"]
            if overlap and side.spread:
                args += ["--mxperf-side-spread", cpu_sets.describe(side.spread)]
            finished[name] = _run_side(side, args, servers[name], timeout, cancelled)
        except BaseException as exc:  # re-raised by the controller's thread
            errors.append(exc)

    threads = [
        threading.Thread(target=body, args=(name, side, argv), daemon=True)
        for name, side, argv, _ in order
    ]
    conns: dict[socket.socket, str] = {}
    pending: list[socket.socket] = []
    buffers: dict[socket.socket, bytes] = {}
    try:
        with hold():
            for t in threads:
                t.start()
            deadline = time.monotonic() + timeout + _TOGETHER_GRACE
            while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
                readable, _, _ = select.select([listener, *pending, *conns], [], [], 0.05)
                for sock in readable:
                    if sock is listener:
                        pending.append(listener.accept()[0])
                        continue
                    chunk = sock.recv(65536)
                    lines, buffers[sock] = _lines(buffers.get(sock, b"") + chunk)
                    name = conns.get(sock)
                    for line in lines:
                        message = json.loads(line)
                        if name is None:  # the first line names the side
                            name = str(message.get("hello"))
                            conns[sock] = name
                            pending.remove(sock)
                        _send(conns, conductor.event(name, message))
                    if not chunk:
                        if name is not None:
                            del conns[sock]
                            _send(conns, conductor.event(name, None))
                        elif sock in pending:
                            pending.remove(sock)
                        sock.close()
                # A side that ended without saying goodbye (or never connected) is gone.
                for (name, *_), t in zip(order, threads):
                    if not t.is_alive() and conductor.sides[name].state != "gone":
                        _send(conns, conductor.event(name, None))
    except BaseException:
        cancelled.set()
        raise
    finally:
        for sock in [*conns, *pending, listener]:
            sock.close()  # a side waiting for its turn reads EOF and ends
        if any(t.is_alive() for t in threads):
            cancelled.set()
            for srv in servers.values():
                if srv is not None:
                    srv.close()  # ends its running child
        for t in threads:
            t.join()
        path.unlink(missing_ok=True)
    if errors:
        raise errors[0]
    return finished


def _lines(data: bytes) -> tuple[list[bytes], bytes]:
    *lines, rest = data.split(b"\n")
    return [line for line in lines if line.strip()], rest


def _send(conns: dict[socket.socket, str], replies: list[tuple[str, str]]) -> None:
    by_name = {name: sock for sock, name in conns.items()}
    for name, reply in replies:
        sock = by_name.get(name)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.sendall((json.dumps(reply) + "\n").encode())


class PairSetupError(Exception):
    """A revision's side cannot be set up (its worktree or its environment); the message says
    which revision and why, without a traceback."""


class Pairer:
    """Runs paired measurements for a session: worktrees of the revisions asked for (made once,
    removed by `close`), the per-revision environment when one is configured, and the rounds."""

    def __init__(
        self,
        settings: Settings,
        repo_root: Path,
        rootdir: Path,
        hold: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
        overlap: bool = False,
    ) -> None:
        self.settings = settings
        #: The device locks the controller holds for a lock-step round (`run_rounds`).
        self.hold = hold
        self.repo_root = repo_root
        self.rootdir = rootdir
        self._stack = contextlib.ExitStack()
        self._trees: dict[str, Path] = {}
        self._sides: dict[str, SideSpec] = {}
        #: Revisions whose side could not be set up, with why (not retried in this session).
        self._broken: dict[str, str] = {}
        self._cache: dict[tuple[str, tuple[str, ...]], PairedData] = {}
        self._servers: dict[str, ForkServer] = {}
        self._servers_tried: set[str] = set()
        #: Servers started and not yet waited for, and sides whose server starts after them.
        self._servers_starting: list[tuple[str, ForkServer]] = []
        self._servers_later: list[str] = []
        #: The CPUs both sides are pinned to (`pytest_mxperf.system.cpus`; None: not pinned).
        self.cpus = cpu_sets.for_sides(settings.pair_cpus)
        usable = cpu_sets.available()
        #: The CPUs the sides' untimed work may use where it is wider than ``cpus`` (None:
        #: ``cpus``): all of this process's.
        self.spread = usable if overlap and self.cpus and usable and usable - self.cpus else None
        #: Lock-step sides set up at once (`turns.Conductor`): asked for (CPU-only rounds), and
        #: with more than one CPU to do it on.
        self.overlap = overlap and (
            self.spread is not None or (self.cpus is None and (usable is None or len(usable) > 1))
        )

    def server(self, side: str) -> ForkServer | None:
        """The fork server of ``side``'s processes (one per side: lock-step rounds run both
        sides at once), started on first use if `start_servers` has not started it; None
        where sides run as fresh processes: no ``fork`` here, a side in another environment
        (``--mxperf-env-command``: both sides then start alike), or a server that failed."""
        if side not in self._servers_tried:
            self.start_servers()
        self._settle_servers()
        srv = self._servers.get(side)
        return srv if srv is not None and srv.alive() else None

    def start_servers(self) -> None:
        """Start both sides' fork servers without waiting for them (`server` does), so their
        imports overlap whatever this process does meanwhile (collecting the tests): at once
        where each can import MXNet on CPUs of its own (`forkserver.import_places`), else the
        first now and the other once the first is ready."""
        if self.settings.env_command or not forkserver.available():
            return
        sides = [s for s in (HEAD, REV) if s not in self._servers_tried]
        self._servers_tried.update(sides)
        places = forkserver.import_places(self.cpus, cpu_sets.available(), len(sides))
        if places is None:  # two imports on the sides' CPUs gain nothing: one after the other
            self._servers_later += sides[1:]
            sides, places = sides[:1], [None]
        for side, place in zip(sides, places):
            self._launch_server(side, place)

    def _launch_server(self, side: str, place: frozenset[int] | None) -> None:
        with contextlib.suppress(ForkServerError, OSError):
            srv = ForkServer(side_env(), cpus=self.cpus, import_cpus=place, wait=False)
            self._stack.callback(srv.close)
            self._servers_starting.append((side, srv))

    def _settle_servers(self) -> None:
        """Wait for the servers started; then start those left for later, one at a time."""
        while self._servers_starting or self._servers_later:
            for side, srv in self._servers_starting:
                with contextlib.suppress(ForkServerError, OSError):
                    srv.wait_ready()
                    self._servers[side] = srv
            self._servers_starting.clear()
            if self._servers_later:
                self._launch_server(self._servers_later.pop(0), None)

    def _tree(self, sha: str) -> Path:
        if sha not in self._trees:
            cache = worktree.default_cache_dir(self.repo_root)
            self._trees[sha] = self._stack.enter_context(
                worktree.checkout(self.repo_root, sha, cache)
            )
        return self._trees[sha]

    def _rev_side(self, sha: str, tree: Path, rootdir: Path) -> SideSpec:
        """REV's side: this environment, or the revision's own (``--mxperf-env-command``)."""
        command = self.settings.env_command
        if not command:
            return SideSpec(REV, rootdir, cpus=self.cpus, spread=self.spread)
        cache = worktree.default_cache_dir(self.repo_root).parent.parent / "envs"
        env = envs.ensure_env(command, tree, cache, revision=sha)
        return SideSpec(
            REV, rootdir, str(env.python), env.environ(side_env()), self.cpus, self.spread
        )

    def run(
        self, rev_label: str, sha: str, nodeids: Sequence[str], progress: Callable[[str], None]
    ) -> PairedData:
        """Paired rounds of ``nodeids``: at least ``--mxperf-rounds``, more (up to
        ``--mxperf-max-rounds``) for the undecided cases more rounds could fail
        (`pairdata.worth_more_rounds`), then a profile of the slower ones. Cached per revision
        and ids."""
        cache_key = (sha, tuple(sorted(nodeids)))
        if cache_key in self._cache:
            return self._cache[cache_key]
        specs = {
            REV: self._setup(sha),
            HEAD: SideSpec(HEAD, self.rootdir, cpus=self.cpus, spread=self.spread),
        }
        pinned = "" if self.cpus is None else cpu_sets.describe(self.cpus)
        data = PairedData(rev_label, sha, cpus=pinned)
        s = self.settings
        run = functools.partial(
            run_rounds,
            data,
            specs,
            s,
            progress=progress,
            server=self.server,
            hold=self.hold,
            overlap=self.overlap,
        )
        run(nodeids, s.rounds)
        while len(data.rounds) < s.max_rounds:
            open_keys = worth_more_rounds(
                data, case_keys(data), s.min_effect, s.strict, s.max_rounds
            )
            if not open_keys:
                break
            run(nodeids_of(data, open_keys), 1)
        # Operator profiles only where they explain something: one more process per side for
        # the cases found slower (with --mxperf-profile the first round profiled them all).
        slower = [] if s.profile else regressed(data, case_keys(data), s.min_effect)
        if slower:
            run(nodeids_of(data, slower), 1, profile=True)
        self._cache[cache_key] = data
        return data

    def _setup(self, sha: str) -> SideSpec:
        """REV's side of ``sha``, set up once per session (a failure too: an environment that
        failed to build is not rebuilt for every suspected case).

        :raises PairSetupError: the worktree or the environment could not be made.
        """
        if sha in self._broken:
            raise PairSetupError(self._broken[sha])
        if sha not in self._sides:
            try:
                tree = self._tree(sha)
                rel = self.rootdir.resolve().relative_to(self.repo_root.resolve())
                self._sides[sha] = self._rev_side(sha, tree, tree / rel)
            except (worktree.WorktreeError, envs.EnvBuildError, ValueError) as exc:
                self._broken[sha] = f"revision {sha[:10]} cannot be measured here: {exc}"
                raise PairSetupError(self._broken[sha]) from None
        return self._sides[sha]

    def close(self) -> None:
        self._stack.close()
