"""Which CPUs the sides of a paired run may use: both sides of every round are pinned to the same
set, so neither gets a faster or a quieter CPU than the other.

On a shared VM the CPUs themselves differ in speed, and a process tends to stay on the one it
started on: on a 2-vCPU VM two processes running the same code unpinned differed by 3-5% for
their whole lives depending on which vCPU each had landed on, which is noise no number of
blocks within a process removes. Paired A/A runs of one case, 10 rounds each, alternating
pinned and unpinned: per-round spread of the ratios 3.5%, 3.7%, 6.0% pinned against 10.1%,
5.4%, 7.0% unpinned.

``auto`` (the default) pins the sides to the upper half of the CPUs this process may use (the
low-numbered ones take more interrupts), where that leaves MXNet's OpenMP thread count as it is
unpinned (MXNet sizes its pool from the CPUs a process may use): on 2 vCPUs MXNet runs one
thread either way and the sides get CPU 1; with 4 or more CPUs and MXNet's default count (half
the CPUs on x86) only all of them keep it, so the sides are not pinned unless OMP_NUM_THREADS
fixes the count. With one CPU there is nothing to choose. ``off`` leaves the sides where the
scheduler puts them; a list (``1``, ``0-3``, ``2,5``) names the CPUs, whatever that does to the
thread count.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection

AUTO, OFF = "auto", "off"


def available() -> frozenset[int] | None:
    """The CPUs this process may run on; None where the platform cannot tell or pin."""
    if not (hasattr(os, "sched_getaffinity") and hasattr(os, "sched_setaffinity")):
        return None
    return frozenset(os.sched_getaffinity(0))


def parse(text: str) -> str:
    """The setting's canonical text: ``auto``, ``off`` or a sorted list such as ``0-3,6``.

    :raises ValueError: not a CPU list, or a CPU this process may not use.
    """
    value = text.strip().lower()
    if value in (AUTO, OFF):
        return value
    cpus = _expand(value)
    usable = available()
    if usable is None:
        raise ValueError("this platform cannot pin processes to CPUs (use auto or off)")
    missing = sorted(cpus - usable)
    if missing:
        raise ValueError(
            f"CPU {', '.join(map(str, missing))} is not available to this process "
            f"(available: {describe(usable)})"
        )
    return describe(cpus)


def describe(cpus: Collection[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"``."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def for_sides(
    setting: str,
    usable: frozenset[int] | None = None,
    threads: Callable[[int], int] | None = None,
) -> frozenset[int] | None:
    """The CPUs both sides are pinned to for ``setting`` (see the module docstring); None: not
    pinned.

    ``auto`` never changes how many OpenMP threads MXNet runs: ``threads(n)`` is the count a
    process allowed ``n`` CPUs gets (default: `fingerprint.threads_in_force` of this
    environment). It takes the smallest upper slice of the CPUs, half of them or more and no
    fewer than the threads, that keeps the unpinned count; where only all of them do (MXNet's
    default halves the usable CPUs on x86, so with 4 or more CPUs and no OMP_NUM_THREADS), the
    sides are not pinned.
    """
    usable = available() if usable is None else usable
    if setting == OFF or usable is None:
        return None
    if setting != AUTO:
        return frozenset(_expand(setting))
    if threads is None:
        from pytest_mxperf.system.fingerprint import threads_in_force

        def threads(n: int) -> int:
            return int(threads_in_force(os.environ, cpus=n)["omp_threads"])

    ordered = sorted(usable)
    unpinned = threads(len(ordered))
    for size in range(max(1, len(ordered) // 2, unpinned), len(ordered)):
        if threads(size) == unpinned:  # and no more threads than CPUs
            return frozenset(ordered[-size:])
    return None


def members(text: str) -> frozenset[int]:
    """The CPUs of a list such as ``0-2,5``; raises ValueError naming a part that is not one."""
    return frozenset(_expand(text))


def _expand(text: str) -> set[int]:
    """``"0-2,5"`` -> ``{0, 1, 2, 5}``; raises ValueError naming a part that is no CPU or range."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, sep, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last if sep else first)
        except ValueError:
            raise ValueError(
                f"{part.strip()!r} is not a CPU number or range (use auto, off, or e.g. 1 or 0-3,6)"
            ) from None
        if low < 0 or high < low:
            raise ValueError(f"{part.strip()!r} is not a CPU range (e.g. 0-3)")
        cpus.update(range(low, high + 1))
    return cpus


def pinning(cpus: Collection[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that pins the new process (and so every thread and child it starts) to
    ``cpus``; None when there is nothing to pin."""
    if not cpus:
        return None
    chosen = frozenset(cpus)

    def pin() -> None:
        os.sched_setaffinity(0, chosen)

    return pin


def pin_threads(cpus: Collection[int]) -> None:
    """Move every thread of this process (MXNet's engine and OpenMP workers included) to
    ``cpus``: ``sched_setaffinity`` moves one thread, and threads started later inherit the mask
    of the thread that starts them. A thread that ended meanwhile is skipped."""
    chosen = frozenset(cpus)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), chosen)
        except (ProcessLookupError, FileNotFoundError):
            continue
