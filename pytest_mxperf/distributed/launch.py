"""The local launcher of distributed data-parallel cases: scheduler, servers and workers.

It does on one machine what MXNet's ``tools/launch.py --launcher local`` does, with the
addresses pinned to 127.0.0.1: a free scheduler port, one process per rank with ``DMLC_*``
variables, and then it owns them. Every rank runs in a session of its own (a Ctrl-C in the
terminal reaches only the launcher, which ends them) and dies with its parent on Linux; on
success, failure, timeout or interrupt every rank is ended and reaped before this returns. A
rank that dies fails the case with the tail of its output.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Callable

from pytest_mxperf.distributed.rank_env import default_threads, free_port, rank_environment
from pytest_mxperf.measuring.dp_result import DataParallelResult
from pytest_mxperf.measuring.dp_scaling import (
    DataParallelError,
    DataParallelSpec,
    ScalingCase,
    WorkerReport,
    aggregate,
)
from pytest_mxperf.system import scratch

TAIL_LINES = 40
_PR_SET_PDEATHSIG = 1


class LaunchError(DataParallelError):
    """The ranks of a distributed case could not run to the end."""


class RankFailed(LaunchError):
    """A rank exited before its job was done; the message carries its output's tail."""

    def __init__(self, message: str, rank: RankProcess, returncode: int, tail: str) -> None:
        super().__init__(message)
        self.rank = rank
        self.returncode = returncode
        self.tail = tail


class LaunchTimeout(LaunchError):
    """The case ran longer than its timeout; every rank was ended."""


@dataclass(frozen=True)
class RankProcess:
    """One launched rank: its role, its index within the role, pid and output file."""

    role: str
    index: int
    pid: int
    log: Path

    @property
    def name(self) -> str:
        return f"{self.role} {self.index}" if self.role != "scheduler" else "scheduler"


def _die_with_parent() -> None:
    """Runs in the child before exec: a rank must not outlive a launcher that was killed."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of a rank's output."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return "(no output file)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(no output)"


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class _Ranks:
    """The launched processes of one case; ``end()`` leaves none behind."""

    def __init__(self) -> None:
        self.procs: list[tuple[RankProcess, subprocess.Popen[bytes], IO[bytes]]] = []

    def start(
        self, role: str, index: int, cmd: Sequence[str], env: dict[str, str], log: Path
    ) -> None:
        out = log.open("wb")
        try:
            proc = subprocess.Popen(
                list(cmd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: Ctrl-C is ours to handle
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        except BaseException:
            out.close()
            raise
        self.procs.append((RankProcess(role, index, proc.pid, log), proc, out))

    @property
    def ranks(self) -> list[RankProcess]:
        return [rank for rank, _, _ in self.procs]

    def end(self, grace: float) -> None:
        """SIGTERM to each rank's process group, SIGKILL after ``grace`` s, then reap all."""
        alive = [(r, p) for r, p, _ in self.procs if p.poll() is None]
        for _, proc in alive:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for _, proc in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for _, proc in alive:
            if proc.poll() is None:
                _signal_group(proc, signal.SIGKILL)
        for _, proc, out in self.procs:
            proc.wait()
            # A rank's own children (none expected) die with its group.
            _signal_group(proc, signal.SIGKILL)
            out.close()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


@contextlib.contextmanager
def _workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with scratch.directory("dist") as tmp:
        yield tmp


def launch(
    spec: DataParallelSpec,
    *,
    workdir: Path | None = None,
    run_id: str | None = None,
    python: str = sys.executable,
    on_poll: Callable[[Sequence[RankProcess]], None] | None = None,
    poll_interval: float = 0.05,
    grace: float = 5.0,
) -> list[WorkerReport]:
    """Run one distributed case with ``spec.workers`` workers and return their reports.

    ``on_poll`` is called with the running ranks while the launcher waits (tests inspect the
    processes with it). Raises :class:`RankFailed` when a rank dies and
    :class:`LaunchTimeout` after ``spec.timeout`` seconds; the ranks are ended in every case.
    """
    if not spec.distributed:
        raise ValueError(f"kvstore {spec.kvstore!r} runs in one process: nothing to launch")
    run_id = run_id or uuid.uuid4().hex
    threads = spec.threads_per_worker or default_threads(spec.workers)
    with _workdir(workdir) as work:
        spec_file = work / "spec.json"
        spec_file.write_text(json.dumps(spec.as_dict(), sort_keys=True))
        out_pattern = work / "worker-{rank}.json"
        port = free_port()
        ranks = _Ranks()
        try:
            roles = [("scheduler", 0)]
            roles += [("server", i) for i in range(spec.servers)]
            roles += [("worker", i) for i in range(spec.workers)]
            for role, index in roles:
                env = rank_environment(
                    os.environ,
                    role=role,
                    index=index,
                    port=port,
                    workers=spec.workers,
                    servers=spec.servers,
                    threads=threads,
                    run_id=run_id,
                )
                cmd = [python, "-m", "pytest_mxperf.distributed.rank", "--spec", str(spec_file)]
                cmd += ["--out", str(out_pattern)]
                ranks.start(role, index, cmd, env, work / f"{role}-{index}.log")
            _wait(spec, ranks, on_poll, poll_interval)
        finally:
            ranks.end(grace)
        return _collect(spec, work, ranks.ranks)


def _wait(
    spec: DataParallelSpec,
    ranks: _Ranks,
    on_poll: Callable[[Sequence[RankProcess]], None] | None,
    poll_interval: float,
) -> None:
    """Until every worker has exited 0; the first rank that dies before that fails the case."""
    deadline = time.monotonic() + spec.timeout
    while True:
        if on_poll is not None:
            on_poll(ranks.ranks)
        states = [(rank, proc.poll()) for rank, proc, _ in ranks.procs]
        for rank, code in states:
            if code is not None and code != 0:
                raise _failed(spec, rank, code)
        # A scheduler or server leaves with status 0 only once the workers are finalizing, so
        # that is no failure; one that hangs them shows up as the timeout.
        workers_done = all(code == 0 for rank, code in states if rank.role == "worker")
        if workers_done:
            return
        if time.monotonic() > deadline:
            logs = "\n".join(
                f"--- {r.name} (pid {r.pid}) ---\n{tail(r.log, 10)}" for r in ranks.ranks
            )
            raise LaunchTimeout(
                f"{spec.kvstore} with {spec.workers} workers did not finish within "
                f"{spec.timeout:g} s (DataParallelSpec.timeout); every rank was ended.\n{logs}"
            )
        time.sleep(poll_interval)


def _failed(spec: DataParallelSpec, rank: RankProcess, code: int) -> RankFailed:
    text = tail(rank.log)
    return RankFailed(
        f"{rank.name} (pid {rank.pid}) of {spec.kvstore} with {spec.workers} workers "
        f"{_describe_exit(code)}; the other ranks were ended. Last lines of its output:\n{text}",
        rank,
        code,
        text,
    )


def _collect(
    spec: DataParallelSpec, work: Path, ranks: Sequence[RankProcess]
) -> list[WorkerReport]:
    reports = []
    for rank in range(spec.workers):
        path = work / f"worker-{rank}.json"
        if not path.is_file():
            logs = "\n".join(f"--- {r.name} ---\n{tail(r.log, 10)}" for r in ranks)
            raise LaunchError(f"worker rank {rank} exited 0 but wrote no report {path}\n{logs}")
        reports.append(WorkerReport.from_dict(json.loads(path.read_text())))
    return reports


def run_distributed(
    spec: DataParallelSpec,
    *,
    workdir: Path | None = None,
    run_id: str | None = None,
    on_poll: Callable[[Sequence[RankProcess]], None] | None = None,
) -> DataParallelResult:
    """img/s(1) with one worker, then img/s(N) with ``spec.workers``, each a launched job.

    Both use the same OMP threads per worker (sized for N, so the N workers fit the cores):
    weak scaling compares like devices. A rank that fails fails the call: no launch is
    started again (the aborts once taken for MXNet start-up races were the ranks' own doing,
    see `pytest_mxperf.distributed.train.default_layouts`).
    """
    threads = spec.threads_per_worker or default_threads(spec.workers)
    spec = replace(spec, threads_per_worker=threads)
    cases: list[ScalingCase] = []
    for n in (1, spec.workers):
        started = time.perf_counter()
        sub = None if workdir is None else workdir / f"workers-{n}"
        reports = launch(spec.with_world(n), workdir=sub, run_id=run_id, on_poll=on_poll)
        cases.append(aggregate(reports, time.perf_counter() - started))
    return DataParallelResult(spec, cases[0], cases[1])
