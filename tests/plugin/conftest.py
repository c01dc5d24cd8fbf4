"""Set-ups the plugin's end-to-end tests share: a scratch git repository (the pytester
directory, see ``fake_pytester`` and ``commit`` in the root conftest) holding a fake-back-end
suite, with or without a stored baseline."""

from __future__ import annotations

from typing import Callable

import pytest

from pytest_mxperf.testing.repos import SPEEDS_SUITE, write_speeds


@pytest.fixture
def store_baseline(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> Callable[..., str]:
    """A stored baseline in a scratch repository: ``store_baseline(suite, passed=2)`` writes
    ``suite`` as the pytester directory's ``test_suite.py``, commits it (``message``, "A") and
    stores its baselines with ``pytest --mxperf --mxperf-update`` (each of the ``passed`` cases
    passes; the files are left uncommitted). Returns that commit's sha."""

    def store(suite: str, passed: int = 2, message: str = "A") -> str:
        fake_pytester.makepyfile(test_suite=suite)
        sha = commit(message)
        fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=passed)
        return sha

    return store


@pytest.fixture
def suite(fake_pytester: pytest.Pytester, commit: Callable[[str], str]) -> pytest.Pytester:
    """`SPEEDS_SUITE` committed ("suite") with alpha at 400 and beta at 200 img/s."""
    fake_pytester.makepyfile(test_suite=SPEEDS_SUITE)
    write_speeds(fake_pytester.path, alpha=400, beta=200)
    commit("suite")
    return fake_pytester


@pytest.fixture
def stored_suite(suite: pytest.Pytester) -> pytest.Pytester:
    """`suite` with its baselines stored at HEAD (``--mxperf-update``; files not committed)."""
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    return suite
