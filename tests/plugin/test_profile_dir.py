"""An unwritable ``--mxperf-profile`` directory is a usage error before anything is measured
(issue #49; it failed silently), as the other outputs are."""

from __future__ import annotations

import pytest


def test_an_unwritable_profile_directory_is_a_usage_error(suite: pytest.Pytester) -> None:
    (suite.path / "a-file").write_text("a regular file\n")
    result = suite.runpytest("--mxperf", "--mxperf-profile", "a-file/profiles")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--mxperf-profile: cannot write profiles under a-file/profiles (*a-file is not a directory)"
        ]
    )
    assert "mxperf: throughput" not in result.stdout.str()  # nothing was measured
