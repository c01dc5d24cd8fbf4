"""``--mxperf-fixed-malloc`` (`pytest_mxperf.system.malloc`): a run sets glibc's allocator for
the processes it starts, and its report's settings say so; off, or a user's own allocator
setting, leaves the C library's behaviour alone. Results record the user's setting, never the
plugin's own (figures stored before it compare without an environment change)."""

from __future__ import annotations

import json
import os

import pytest

from pytest_mxperf.config.options import SPECS_BY_NAME
from pytest_mxperf.system import malloc
from pytest_mxperf.testing.repos import stored_files

pytestmark = pytest.mark.skipif(
    not malloc.is_glibc(), reason="the allocator is set on 64-bit glibc only"
)
OFF_ENV = SPECS_BY_NAME["fixed_malloc"].env


def stored_environment(suite: pytest.Pytester) -> dict[str, str]:
    (path,) = stored_files(suite.path)
    env: dict[str, str] = json.loads(path.read_text())["cases"]["alpha/inference/float32/bs8/cpu"][
        "environment"
    ]
    return env


def test_a_run_fixes_the_allocator_for_what_it_starts_and_says_so(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-json=report.json")
    result.assert_outcomes(passed=2)
    assert os.environ[malloc.VARIABLE] == malloc.ours()  # xdist workers, sides, ranks
    assert malloc.VARIABLE not in stored_environment(suite)
    report = json.loads((suite.path / "report.json").read_text())
    assert report["settings"]["fixed_malloc"] is True


def test_off_leaves_the_allocator_and_tells_the_processes_it_starts(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-fixed-malloc", "off")
    result.assert_outcomes(passed=2)
    assert malloc.VARIABLE not in os.environ
    assert os.environ[OFF_ENV] == "off"  # a paired run's sides read it
    assert malloc.VARIABLE not in stored_environment(suite)


def test_a_users_own_allocator_setting_stands_and_is_recorded(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    assert malloc.VARIABLE not in os.environ
    env = stored_environment(suite)
    assert env["MALLOC_ARENA_MAX"] == "2" and malloc.VARIABLE not in env


def test_a_bad_value_names_the_option(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--mxperf", "--mxperf-fixed-malloc", "sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mxperf-fixed-malloc*must be on or off*"])
