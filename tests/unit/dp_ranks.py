"""What the data-parallel tests with real MXNet share: the launch they vary (`SPEC`), its
measuring times (`SHORT`; `TINY` where a test checks what happens, not the figures), and what
they see of the launched ranks in /proc (`Watch`, `pids_with_env`). Imports no MXNet."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_mxperf.distributed.launch import RankProcess
from pytest_mxperf.distributed.rank_env import RUN_ID_ENV
from pytest_mxperf.measuring.dp_scaling import DataParallelSpec
from pytest_mxperf.measuring.measure import MeasureConfig

#: A few seconds a launch: `SPEC`'s, for tests that act on a worker while it trains (it dies
#: at a step, Ctrl-C) and need it still training then.
SHORT = MeasureConfig(
    min_time=0.4,
    max_time=1.0,
    warmup_time=1.0,
    warmup_min_time=0.2,
    block_time=0.1,
    min_blocks=5,
    max_blocks=20,
)
#: The least a launch measures (5 blocks of a few steps): for tests of what a launch does
#: (it runs, fails, ends its ranks), whose figures are only checked to exist or differ by
#: construction (the injected exchange: kvstore share 0.62 -> 0.96 and efficiency 0.58 ->
#: 0.29 measured so, as with `SHORT`, at about 3 s a launch less).
TINY = MeasureConfig(
    min_time=0.1,
    max_time=0.3,
    warmup_time=0.3,
    warmup_min_time=0.05,
    block_time=0.02,
    min_blocks=5,
    max_blocks=10,
)
SPEC = DataParallelSpec(
    factory="mxperf_dp_models:dense_net",
    batch_per_device=16,
    input_shape=(3, 32, 32),
    kvstore="dist_sync",
    workers=2,
    servers=1,
    step_hook="mxperf_dp_models:hooks",
    timeout=180.0,
    measure=SHORT,
)


# /proc inspection ---------------------------------------------------------------------------


def pids_with_env(name: str, value: str) -> list[int]:
    """Live processes (of this user) whose environment holds ``name=value``."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        if needle in env:
            found.append(int(entry.name))
    return found


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode(errors="replace").partition("=") for item in raw if item)
    return {k: v for k, _, v in pairs}


#: A network namespace's TCP tables (``tcp``, ``tcp6``) as `listening_addresses` reads them.
Tables = dict[str, list[str]]


def tcp_tables(pid: int, seen: dict[str, Tables]) -> Tables:
    """The TCP tables of ``pid``'s network namespace, read once per namespace into ``seen``.

    The kernel writes out every socket of the namespace for each read (milliseconds here, where
    other runs leave hundreds in TIME_WAIT): read per rank on every 50 ms poll of a launch, the
    tables took half of a core that the ranks were measuring on."""
    namespace = os.readlink(f"/proc/{pid}/ns/net")
    if namespace not in seen:
        tables: Tables = {}
        for table in ("tcp", "tcp6"):
            try:
                tables[table] = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
        seen[namespace] = tables
    return seen[namespace]


def listening_addresses(pid: int, seen: dict[str, Tables] | None = None) -> set[tuple[str, int]]:
    """TCP sockets the process listens on, as (address, port); ``seen``: the tables already
    read (`tcp_tables`) during this look at the ranks."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found: set[tuple[str, int]] = set()
    if not inodes:
        return found
    for table, lines in tcp_tables(pid, {} if seen is None else seen).items():
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                addr, port = cols[1].split(":")
                found.add((_address(addr, table == "tcp6"), int(port, 16)))
    return found


def listening_ports() -> set[int]:
    """Every TCP port of this network namespace with a socket in LISTEN."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A":
                    ports.add(int(cols[1].split(":")[1], 16))
    return ports


def _address(hexaddr: str, v6: bool) -> str:
    if v6:
        return "v6:" + hexaddr
    return ".".join(str(int(hexaddr[i : i + 2], 16)) for i in (6, 4, 2, 0))


@dataclass
class Watch:
    """What the launcher's on_poll saw of the running ranks."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pids: set[int] = field(default_factory=set)
    roles: dict[int, str] = field(default_factory=dict)
    listening: set[tuple[str, int]] = field(default_factory=set)
    ports: set[int] = field(default_factory=set)
    polls: int = 0

    def __call__(self, ranks: Sequence[RankProcess]) -> None:
        self.polls += 1
        seen: dict[str, Tables] = {}  # each namespace's TCP tables, once this poll
        for rank in ranks:
            self.pids.add(rank.pid)
            self.roles[rank.pid] = rank.role
            try:
                self.ports.add(int(environ_of(rank.pid)["DMLC_PS_ROOT_PORT"]))
                self.listening |= listening_addresses(rank.pid, seen)
            except (OSError, KeyError):
                pass  # the rank just exited

    def assert_all_gone(self) -> None:
        assert self.pids, "the launcher never reported its ranks"
        assert pids_with_env(RUN_ID_ENV, self.run_id) == []
        for pid in self.pids:
            assert not Path(f"/proc/{pid}").exists(), f"{self.roles[pid]} pid {pid} is left"
        assert self.ports, "no scheduler port was seen"
        for port in self.ports:
            assert port not in listening_ports(), f"port {port} is still listened on"
            with socket.socket() as sock:
                # Closed connections linger in TIME_WAIT (kernel state, no process): as any
                # server would, reuse the address; a listener left behind still fails this.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", port))
                sock.listen()
