"""The C library's allocator, set the same in every process that measures (glibc only).

Why: an input pipeline that decodes in the caller's thread (a Gluon ``DataLoader`` without
workers) frees and allocates buffers of a few hundred kilobytes to tens of megabytes for every
image and batch. glibc serves them either from an arena's heap or from fresh ``mmap``\\ s, and
which one depends on the process's history: its dynamic mmap threshold moves with the sizes
freed so far, each thread may get an arena of its own, and heaps are trimmed and grown again.
A process in the second state zero-fills a few hundred pages per image (page faults, time in
the kernel). Two processes of the same code, measured in turns on one machine, differed by up
to 33% within one round (one side ~250,000 page faults, the other ~300: docs/measurements.md),
so a paired run needed its most block pairs and more rounds for every pipeline case.

Fixed values take the history out: one arena (``arena_max``), an mmap threshold at glibc's
largest (``mmap_threshold``, 32 MiB: every buffer below it comes from the heap) and a trim
threshold that keeps freed memory mapped (``trim_threshold``). They are glibc's documented
tunables: child processes (xdist workers, paired sides, launched ranks, DataLoader workers)
read them from ``GLIBC_TUNABLES`` when they start, and this process sets them with ``mallopt``
(for what it allocates from then on). A user's own ``glibc.malloc`` tunables or ``MALLOC_*``
variables are left as they are.

A result records a user's own allocator settings (``MALLOC_*``, other ``GLIBC_TUNABLES``), not
these (`users_part`); the JSON report's settings say whether they were in force.
"""

from __future__ import annotations

import ctypes
import platform
import sys
from collections.abc import Mapping, MutableMapping

VARIABLE = "GLIBC_TUNABLES"
#: glibc's tunables, by name: one arena, mmap only above 32 MiB (glibc's largest threshold on
#: 64-bit), and no trimming below 1 GiB of free memory at the top of the heap.
TUNABLES = {
    "glibc.malloc.arena_max": 1,
    "glibc.malloc.mmap_threshold": 32 * 1024 * 1024,
    "glibc.malloc.trim_threshold": 1024 * 1024 * 1024,
}
#: ``mallopt`` parameters of the same settings (glibc's malloc.h).
_MALLOPT = {
    "glibc.malloc.arena_max": -8,  # M_ARENA_MAX
    "glibc.malloc.mmap_threshold": -3,  # M_MMAP_THRESHOLD
    "glibc.malloc.trim_threshold": -1,  # M_TRIM_THRESHOLD
}
#: The older variables that set the same (a user who sets one chose for themselves).
_USER_VARIABLES = (
    "MALLOC_ARENA_MAX",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",
)
#: Each tunable as ``GLIBC_TUNABLES`` writes it (``name=value``).
_OURS = tuple(f"{name}={value}" for name, value in TUNABLES.items())


def ours() -> str:
    """The tunables this module sets, as ``GLIBC_TUNABLES`` writes them."""
    return ":".join(_OURS)


def users_part(value: str) -> str:
    """A ``GLIBC_TUNABLES`` value without the tunables this module sets: what a result records
    of it (`fingerprint.perf_environment`). Like pinning a paired run's sides, they are a
    measurement condition of this plugin (``--mxperf-fixed-malloc``, in the JSON report's
    settings), not a change of the user's software: figures stored before they existed still
    compare, where an environment change would leave every drop a pair did not confirm failed."""
    return ":".join(part for part in value.split(":") if part and part not in _OURS)


def is_glibc() -> bool:
    """Whether this process runs on a 64-bit glibc: the only C library whose allocator is set
    here, and the word size whose largest mmap threshold is 32 MiB (half as much on 32-bit)."""
    return platform.libc_ver()[0] == "glibc" and sys.maxsize > 2**32


def with_tunables(env: Mapping[str, str]) -> str | None:
    """``GLIBC_TUNABLES`` for ``env`` with this module's tunables added to any others it holds,
    or None when ``env`` sets the allocator itself (a ``glibc.malloc`` tunable other than
    ours, or a ``MALLOC_*`` variable): the user's choice stands."""
    if any(env.get(name) for name in _USER_VARIABLES):
        return None
    current = env.get(VARIABLE, "")
    if ours() in current:
        return current
    parts = [part for part in current.split(":") if part]
    if any(part.startswith("glibc.malloc.") for part in parts):
        return None
    return ":".join([*parts, ours()])


def fix_allocator(env: MutableMapping[str, str]) -> bool:
    """Set the allocator's tunables for the processes started from here on (in ``env``) and
    for this one (``mallopt``, for what it allocates from then on): True when they are in
    force here, False when the user set the allocator (see `with_tunables`), this is not a
    64-bit glibc, or glibc refused one (it accepts these values on 64-bit)."""
    if not is_glibc():
        return False
    value = with_tunables(env)
    if value is None:
        return False
    env[VARIABLE] = value
    libc = ctypes.CDLL(None)  # this process's own symbols, glibc's among them (no lookup)
    return all(libc.mallopt(_MALLOPT[name], n) == 1 for name, n in TUNABLES.items())
