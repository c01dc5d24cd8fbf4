"""The allocator's tunables (`pytest_mxperf.system.malloc`): added to a user's other glibc
tunables, never over their own allocator settings, and in force in a process started with them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_mxperf.system import fingerprint, malloc

ONE_ARENA = "glibc.malloc.arena_max=1"


def test_tunables_are_added_to_an_empty_environment() -> None:
    value = malloc.with_tunables({})
    assert value == malloc.ours()
    assert ONE_ARENA in value.split(":")
    assert "glibc.malloc.mmap_threshold=33554432" in value.split(":")


def test_a_users_other_tunables_are_kept_and_ours_not_added_twice() -> None:
    value = malloc.with_tunables({malloc.VARIABLE: "glibc.cpu.hwcaps=-AVX512F"})
    assert value == f"glibc.cpu.hwcaps=-AVX512F:{malloc.ours()}"
    assert malloc.with_tunables({malloc.VARIABLE: value}) == value


@pytest.mark.parametrize(
    "env",
    [
        {malloc.VARIABLE: "glibc.malloc.arena_max=4"},
        {malloc.VARIABLE: "glibc.cpu.x86_shstk=on:glibc.malloc.tcache_count=0"},
        {"MALLOC_ARENA_MAX": "2"},
        {"MALLOC_MMAP_THRESHOLD_": "131072"},
    ],
)
def test_a_users_own_allocator_settings_stand(env: dict[str, str]) -> None:
    assert malloc.with_tunables(env) is None
    before = dict(env)
    assert malloc.fix_allocator(env) is False
    assert env == before


def test_a_result_records_the_users_allocator_settings_not_ours() -> None:
    record = fingerprint.perf_environment
    assert record({malloc.VARIABLE: malloc.ours(), "HOME": "/root"}, private=()) == {}
    mixed = {malloc.VARIABLE: f"glibc.cpu.hwcaps=-AVX512F:{malloc.ours()}"}
    assert record(mixed, private=()) == {malloc.VARIABLE: "glibc.cpu.hwcaps=-AVX512F"}
    own = {malloc.VARIABLE: "glibc.malloc.arena_max=4", "MALLOC_TRIM_THRESHOLD_": "0"}
    assert record(own, private=()) == own


@pytest.mark.skipif(not malloc.is_glibc(), reason="the allocator is set on 64-bit glibc only")
def test_a_process_started_after_fixing_runs_with_them() -> None:
    """The variable reaches a child process's C library, which applies it at start: its
    threads share one arena (where each would get an arena of its own without it)."""
    env: dict[str, str] = {}
    assert malloc.fix_allocator(env) is True
    assert env[malloc.VARIABLE] == malloc.ours()
    # Each thread mallocs while the others are alive; glibc's malloc_stats then lists every
    # arena ("Arena 0:", "Arena 1:", ...) on stderr.
    child = (
        "import ctypes, threading\n"
        "libc = ctypes.CDLL('libc.so.6')\n"
        "libc.malloc.restype = ctypes.c_void_p\n"
        "go = threading.Barrier(4)\n"
        "def grab():\n"
        "    libc.malloc(64)\n"
        "    go.wait()\n"
        "ts = [threading.Thread(target=grab) for _ in range(4)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "libc.malloc_stats()\n"
    )

    def arenas(child_env: dict[str, str]) -> int:
        run = subprocess.run(
            [sys.executable, "-c", child], env=child_env, capture_output=True, text=True, check=True
        )
        return run.stderr.count("Arena ")

    assert arenas(env) == 1
    assert arenas({}) > 1
