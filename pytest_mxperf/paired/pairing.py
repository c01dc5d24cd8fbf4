"""Paired runs, plugin side: the `Pairer` a run keeps (REV's worktree, environments and fork
servers, set up once) and what it asks of `rounds` for each test."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.paired import envs, gitcmd, worktree
from pytest_mxperf.paired.forkserver import ForkServer
from pytest_mxperf.paired.more_rounds import Clears, worth_more_rounds
from pytest_mxperf.paired.pairdata import HEAD, REV, PairedData, case_keys, nodeids_of, regressed
from pytest_mxperf.paired.rounds import run_rounds
from pytest_mxperf.paired.servers import SideServers
from pytest_mxperf.paired.sides import SideSpec, side_env
from pytest_mxperf.system import cpus as cpu_sets
from pytest_mxperf.system.sigterm import sigterm_as_interrupt

#: ``--mxperf-pair-budget auto``: extra rounds may take this share of what the first
#: ``--mxperf-rounds`` rounds took (all pairs of the session together), and at least
#: AUTO_BUDGET_FLOOR seconds (a one-case repository's rounds take seconds: its extra rounds
#: are what decides it). A fixed budget, or half the first rounds' time, cost too much or
#: stopped too soon (docs/measurements.md, "Moved from code comments").
AUTO_BUDGET_SHARE = 1.0
AUTO_BUDGET_FLOOR = 30.0


def auto_budget(first_seconds: float) -> float:
    """The seconds ``--mxperf-pair-budget auto`` gives extra rounds after first rounds that took
    ``first_seconds``."""
    return max(AUTO_BUDGET_FLOOR, AUTO_BUDGET_SHARE * first_seconds)


def _among(data: PairedData, keys: Sequence[CaseKey] | None) -> list[CaseKey]:
    """``data``'s cases that are among ``keys`` (None: all of them), in ``data``'s order."""
    found = case_keys(data)
    return found if keys is None else [k for k in found if k in keys]


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
        tell: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.settings = settings
        #: One line on the terminal now (an environment's build: minutes for MXNet's wheels).
        self.tell = tell
        #: The device locks the controller holds for a lock-step round (`run_rounds`).
        self.hold = hold
        self.repo_root = repo_root
        self.rootdir = rootdir
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(sigterm_as_interrupt())
        self._trees: dict[str, Path] = {}
        self._sides: dict[str, SideSpec] = {}
        #: Revisions whose side could not be set up, with why (not retried in this session).
        self._broken: dict[str, str] = {}
        self._cache: dict[tuple[str, tuple[str, ...]], PairedData] = {}
        #: Seconds spent on rounds beyond ``--mxperf-rounds`` in this session, against
        #: ``--mxperf-pair-budget``, and on the first ``--mxperf-rounds`` rounds (its ``auto``).
        self.extra_seconds = 0.0
        self.first_seconds = 0.0
        #: The CPUs both sides are pinned to (`pytest_mxperf.system.cpus`; None: not pinned).
        self.cpus = cpu_sets.for_sides(settings.pair_cpus)
        self._servers = SideServers(self.cpus, self._stack, enabled=not settings.env_command)
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
        """The fork server of ``side``'s processes (`servers.SideServers.server`)."""
        return self._servers.server(side)

    def start_servers(self) -> None:
        """Start both sides' fork servers without waiting for them (`servers.SideServers`)."""
        self._servers.start()

    def _tree(self, sha: str) -> Path:
        if sha not in self._trees:
            cache = worktree.default_cache_dir(self.repo_root)
            if not self._trees:
                # Runs once the worktrees are removed: no empty directory per repository stays
                # (<tmp>/pytest-mxperf-cache-<user>/worktrees/<repo>-<hash>, and above it).
                self._stack.callback(worktree.remove_empty, cache, 3)
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
        env = envs.ensure_env_told(command, tree, cache, sha, self.tell)
        return SideSpec(
            REV, rootdir, str(env.python), env.environ(side_env()), self.cpus, self.spread
        )

    def run(
        self,
        rev_label: str,
        sha: str,
        nodeids: Sequence[str],
        progress: Callable[[str], None],
        head_name: str = "HEAD",
        clears: Clears | None = None,
        earlier: dict[CaseKey, list[tuple[CaseResult, CaseResult]]] | None = None,
        handed: Sequence[CaseResult] = (),
        focus: Sequence[CaseKey] | None = None,
    ) -> PairedData:
        """Paired rounds of ``nodeids``: at least ``--mxperf-rounds``, more (up to
        ``--mxperf-max-rounds``) for the undecided cases more rounds could fail
        (`more_rounds.worth_more_rounds`; with ``clears``, also those an arbitration would clear
        at their own stored threshold), then a profile of the slower ones. ``earlier``: rounds
        of some of the cases measured by earlier pairs of ``sha`` in this session, counted as
        theirs (`PairedData.earlier`). ``handed``: this process's results of cases of
        ``nodeids`` judged already, handed back to the sides' calls, never measured
        (`rounds.run_rounds`). Cached per revision and ids.

        ``focus``: the cases the caller needs decided (an arbitration's suspected case; None:
        every case). The rounds beyond the first, a regression's second run and the profile go
        to those alone; the other cases get the first rounds (the figures of a suspect's
        test-mates after it in its test), and the rest of theirs when a later call on the cached
        run names them in its ``focus`` (their stored comparison suspected them too)."""
        done = None if earlier else self.cached(sha, nodeids)
        if done is not None:
            if focus is not None and done.focused is not None:
                wanted = [k for k in _among(done, focus) if k not in done.focused]
                if wanted:
                    done.focused.update(wanted)
                    specs = self._specs(sha)
                    runner = self._runner(done, specs, progress, handed)
                    self._extra_rounds(done, runner, wanted, clears, budgeted=True)
                    self._settle(done, specs, wanted, runner, progress, clears, handed)
            return done
        specs = self._specs(sha)
        pinned = "" if self.cpus is None else cpu_sets.describe(self.cpus)
        data = PairedData(rev_label, sha, cpus=pinned, head_name=head_name)
        data.earlier = dict(earlier or {})
        data.focused = None if focus is None else set(focus)
        runner = self._rounds(data, specs, nodeids, progress, clears, True, handed, more=focus)
        self._settle(data, specs, _among(data, focus), runner, progress, clears, handed)
        self._cache[(sha, tuple(sorted(nodeids)))] = data
        return data

    def _specs(self, sha: str) -> dict[str, SideSpec]:
        return {
            REV: self._setup(sha),
            HEAD: SideSpec(HEAD, self.rootdir, cpus=self.cpus, spread=self.spread),
        }

    def _settle(
        self,
        data: PairedData,
        specs: dict[str, SideSpec],
        keys: Sequence[CaseKey],
        runner: Callable[..., None],
        progress: Callable[[str], None],
        clears: Clears | None,
        handed: Sequence[CaseResult],
    ) -> None:
        """What follows the rounds for ``keys`` of ``data``: a second run of those found
        regressed (added to ``data.confirmation`` when one ran for others already), then a
        profile of the slower ones."""
        s = self.settings
        if s.pair_confirm:
            # Data-parallel cases are judged on their efficiency, which the first run decides.
            found = regressed(data, keys, s.min_effect)
            confirmed = set() if data.confirmation is None else set(case_keys(data.confirmation))
            again = [k for k in found if not data.scaling_pairs(k) and k not in confirmed]
            if again:
                data.confirmation = self._confirm(
                    data, specs, again, progress, clears, handed, into=data.confirmation
                )
        # Operator profiles only where they explain something: one more process per side for
        # the cases found slower (with --mxperf-profile the first round profiled them all).
        wanted = s.pair_profile and not s.profile  # --mxperf-pair-profile off: none
        slower = regressed(data, keys, s.min_effect) if wanted else []
        if slower:
            runner(nodeids_of(data, slower), 1, profile=True, keys=slower)

    def runs(self) -> list[PairedData]:
        """Every paired run of this session, in the order they ran."""
        return list(self._cache.values())

    def cached(self, sha: str, nodeids: Sequence[str]) -> PairedData | None:
        """The latest paired run of ``sha`` in this session that measured every one of
        ``nodeids`` (a run's joint pair holds the cases after it, and the rounds of those it
        measured again after their own pairs), or None."""
        for (done_sha, done_ids), done in reversed(self._cache.items()):
            if done_sha == sha and set(nodeids) <= set(done_ids):
                return done
        return None

    def _confirm(
        self,
        data: PairedData,
        specs: dict[str, SideSpec],
        keys: Sequence[CaseKey],
        progress: Callable[[str], None],
        clears: Clears | None,
        handed: Sequence[CaseResult] = (),
        into: PairedData | None = None,
    ) -> PairedData:
        """The second paired run of ``keys`` (found regressed by ``data``), whose estimates then
        decide them (`PairedData.confirmation`): on new fork servers for both sides, so that
        nothing a side's processes share through one run's rounds (the server each forks from,
        what it loaded where) is shared with the first run. Identical code measured as
        consistently slower on one side in one run (all of a run's rounds, +-4%, one quiet A/A
        run in ten) and not in the next is such a bias; a real loss shows in both. Only
        ``keys`` are measured (their tests' other cases handed back from ``data``): at least
        ``--mxperf-rounds`` rounds, then more while undecided, up to ``--mxperf-max-rounds``;
        the pair budget neither cuts it short nor is spent by it.
        ``into``: the second run already made for other cases of ``data``, whose rounds these
        join (each case's estimate takes the rounds that measured it)."""
        self._servers.renew()
        again = into or PairedData(data.rev_label, data.rev_sha, data.cpus, data.head_name)
        ids, say = nodeids_of(data, keys), lambda text: progress(f"second run, {text}")
        self._rounds(
            again, specs, ids, say, clears, False, only=(keys, data), handed=handed, more=keys
        )
        return again

    def _runner(
        self,
        data: PairedData,
        specs: dict[str, SideSpec],
        progress: Callable[[str], None],
        handed: Sequence[CaseResult],
        earlier: PairedData | None = None,
    ) -> Callable[..., None]:
        """The round runner of ``data`` (`rounds.run_rounds` bound to this session's sides)."""
        return functools.partial(
            run_rounds,
            data,
            specs,
            self.settings,
            progress=progress,
            server=self.server,
            hold=self.hold,
            overlap=self.overlap,
            earlier=earlier,
            handed=handed,
        )

    def _rounds(
        self,
        data: PairedData,
        specs: dict[str, SideSpec],
        nodeids: Sequence[str],
        progress: Callable[[str], None],
        clears: Clears | None,
        budgeted: bool,
        handed: Sequence[CaseResult] = (),
        more: Sequence[CaseKey] | None = None,
        only: tuple[Sequence[CaseKey], PairedData] | None = None,
    ) -> Callable[..., None]:
        """Rounds of ``nodeids`` into ``data``: ``--mxperf-rounds``, then one at a time for the
        cases `more_rounds.worth_more_rounds` names, up to ``--mxperf-max-rounds``. ``budgeted``:
        the first rounds' seconds are the session's `first_seconds` and the extra rounds stop
        once ``--mxperf-pair-budget`` is spent (``data.budget_spent``); else (a regression's
        second run) only the rounds' limit stops them, and none of its seconds count.
        ``only``: the cases to measure, and an earlier run whose results of their tests' other
        cases are handed back (`run_rounds`); ``handed``, the controller's results handed back
        in every round; ``more``: the cases extra rounds may go to (None: every case of
        ``data``).
        Returns the round runner of ``data``."""
        run = self._runner(data, specs, progress, handed, None if only is None else only[1])
        started = time.monotonic()
        run(nodeids, self.settings.rounds, keys=None if only is None else only[0])
        if budgeted:
            self.first_seconds += time.monotonic() - started
        # A regression's second run keeps its seconds to itself, or the next suspects' pairs
        # lose the extra rounds that decide them (docs/measurements.md, beside the neighbour).
        self._extra_rounds(data, run, more, clears, budgeted)
        return run

    def _extra_rounds(
        self,
        data: PairedData,
        run: Callable[..., None],
        more: Sequence[CaseKey] | None,
        clears: Clears | None,
        budgeted: bool,
    ) -> None:
        """Rounds one at a time for the cases of ``more`` (None: all of ``data``'s) that
        `more_rounds.worth_more_rounds` names, up to ``--mxperf-max-rounds`` (and, when
        ``budgeted``, while ``--mxperf-pair-budget`` lasts)."""
        s = self.settings
        budget = s.pair_budget if s.pair_budget is not None else auto_budget(self.first_seconds)
        while len(data.rounds) < s.max_rounds:
            keys = _among(data, more)
            open_keys = worth_more_rounds(data, keys, s.min_effect, s.strict, s.max_rounds, clears)
            if not open_keys:
                break
            if budgeted and self.extra_seconds >= budget:
                data.budget_spent = True
                break
            started = time.monotonic()
            run(nodeids_of(data, open_keys), 1, keys=open_keys)
            if budgeted:
                self.extra_seconds += time.monotonic() - started

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
            except (gitcmd.WorktreeError, envs.EnvBuildError, ValueError) as exc:
                self._broken[sha] = f"revision {sha[:10]} cannot be measured here: {exc}"
                raise PairSetupError(self._broken[sha]) from None
        return self._sides[sha]

    def close(self) -> None:
        self._stack.close()
