"""Which CPUs the sides of a paired run are pinned to: the setting's parsing, the auto choice,
and the pinning of a process started with it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from pytest_mxperf.system import cpus, procgroup

USABLE = cpus.available()
needs_two = pytest.mark.skipif(
    USABLE is None or len(USABLE) < 2, reason="needs a platform that pins and 2 or more CPUs"
)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("auto", "auto"), (" OFF ", "off"), ("0", "0"), ("0,0", "0"), ("0-0", "0")],
)
def test_settings_read_as_canonical_text(text: str, canonical: str) -> None:
    if USABLE is None and canonical not in ("auto", "off"):
        pytest.skip("this platform cannot pin")
    assert cpus.parse(text) == canonical


@needs_two
def test_a_list_is_sorted_and_merged_into_ranges() -> None:
    assert USABLE is not None
    high = max(USABLE)
    expected = f"0,{high}" if high > 1 else "0-1"
    assert cpus.parse(f"{high}, 0") == expected
    assert cpus.parse(f"{high}-{high},0-{high}") == f"0-{high}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fast", "'fast' is not a CPU number or range"),
        ("1-", "'1-' is not a CPU number or range"),
        ("3-1", "'3-1' is not a CPU range"),
        ("-1", "'-1' is not a CPU number or range"),
    ],
)
def test_bad_lists_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cpus.parse(text)


@pytest.mark.skipif(USABLE is None, reason="this platform cannot pin")
def test_a_cpu_this_process_may_not_use_is_named_with_those_it_may() -> None:
    assert USABLE is not None
    absent = max(USABLE) + 1
    with pytest.raises(ValueError) as info:
        cpus.parse(f"0,{absent}")
    assert str(info.value) == (
        f"CPU {absent} is not available to this process (available: {cpus.describe(USABLE)})"
    )


def test_describe_writes_runs_as_ranges() -> None:
    assert cpus.describe({5, 0, 1, 2, 7, 8}) == "0-2,5,7-8"
    assert cpus.describe({3}) == "3"
    assert cpus.describe(()) == ""


def _x86_default(n: int) -> int:
    return max(1, n // 2)  # MXNet's default OpenMP count on x86: half the usable CPUs


@pytest.mark.parametrize(
    ("usable", "threads", "chosen"),
    [
        ({0, 1}, _x86_default, {1}),  # one thread either way: the upper CPU
        ({0}, _x86_default, None),  # one CPU: nothing to choose
        ({0, 1, 2, 3}, _x86_default, None),  # 2 threads unpinned, 1 on two CPUs: not pinned
        ({0, 1, 2, 3}, lambda n: 2, {2, 3}),  # OMP_NUM_THREADS=2 fixes it: the upper half
        ({0, 1, 2, 3, 4, 5, 6, 7}, lambda n: 6, {2, 3, 4, 5, 6, 7}),  # 6 threads: 6 CPUs
        ({0, 1, 2}, lambda n: n, None),  # every CPU a thread (not x86): never pinned
        ({4, 6, 9, 11}, lambda n: 1, {9, 11}),  # a restricted set (taskset, cgroups): its top
    ],
)
def test_auto_takes_the_upper_half_where_the_thread_count_stays(
    usable: set[int], threads: Callable[[int], int], chosen: set[int] | None
) -> None:
    expected = None if chosen is None else frozenset(chosen)
    assert cpus.for_sides("auto", frozenset(usable), threads) == expected


def test_auto_asks_mxnets_thread_rule_of_this_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert cpus.for_sides("auto", frozenset(range(4))) == frozenset({2, 3})
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert cpus.for_sides("auto", frozenset(range(4))) == frozenset({1, 2, 3})


def test_off_and_lists() -> None:
    assert cpus.for_sides("off", frozenset({0, 1})) is None
    assert cpus.for_sides("0-2,5", frozenset(range(8))) == frozenset({0, 1, 2, 5})
    assert cpus.pinning(None) is None and cpus.pinning(()) is None


@needs_two
def test_a_bounded_command_runs_pinned_and_so_does_what_it_starts() -> None:
    assert USABLE is not None
    chosen = {max(USABLE)}
    code = (
        "import os, subprocess, sys; print('self', sorted(os.sched_getaffinity(0)), flush=True); "
        "subprocess.run([sys.executable, '-c', "
        "'import os; print(\"child\", sorted(os.sched_getaffinity(0)))'])"
    )
    done = procgroup.run_bounded(
        [sys.executable, "-c", code], cwd=None, env=None, timeout=60, cpus=chosen
    )
    assert done.returncode == 0, done.tail
    assert done.tail.splitlines() == [f"self {sorted(chosen)}", f"child {sorted(chosen)}"]
    # The caller itself is left as it was.
    assert os.sched_getaffinity(0) == USABLE
    unpinned = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert unpinned.stdout.strip() == str(sorted(USABLE))
