"""A run refuses shared temporary roots another user could control (issue #49): a usage error
naming the directory, before anything is measured."""

from __future__ import annotations

import getpass
import os
import tempfile
from pathlib import Path

import pytest


def test_a_lock_directory_others_can_write_is_a_usage_error(suite: pytest.Pytester) -> None:
    lock_dir = Path(tempfile.gettempdir()) / f"pytest-mxperf-{os.getuid()}"
    lock_dir.mkdir(exist_ok=True)
    lock_dir.chmod(0o777)
    result = suite.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*mxperf: the temporary directory {lock_dir} is writable by group or others*"]
    )
    assert "mxperf: throughput" not in result.stdout.str()  # nothing was measured


def test_a_worktree_cache_others_can_write_is_a_usage_error(suite: pytest.Pytester) -> None:
    cache = Path(tempfile.gettempdir()) / f"pytest-mxperf-cache-{getpass.getuser()}"
    cache.mkdir()
    cache.chmod(0o777)
    result = suite.runpytest("--mxperf", "--mxperf-ab", "HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*mxperf: --mxperf-ab: the temporary directory {cache} is writable by group*"]
    )
    assert not (cache / "worktrees").exists()
