"""Paired runs and arbitration in the baseline commit's own environment
(``--mxperf-env-command``): code and software judged together, and an environment that
cannot be built."""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path
from typing import Callable

import pytest

from pytest_mxperf.paired import envs
from pytest_mxperf.testing.repos import PAIR_SUITE, inflate_baselines, read_report, worktrees

VERSIONED_CONFTEST = """
import os
import sys
from pathlib import Path

import pytest
from pytest_mxperf.testing import FakeBackend


def _mxnet():
    if os.environ.get("FAKE_MXNET"):
        return os.environ["FAKE_MXNET"]
    return "fake-1.8" if (Path(sys.prefix) / "fake-mxnet-1.8").exists() else "fake-1.9.1"


@pytest.fixture(scope="session")
def mxperf_backend():
    return FakeBackend(software={"mxnet": _mxnet(), "python": "3.11", "numpy": "1.23"})
"""

# Run by --mxperf-env-command in the new environment: it sees this environment's packages
# (pytest, the plugin's dependencies) and holds "MXNet 1.8" (the marker file).
MAKE_ENV = """
import pathlib, sys, sysconfig
site = pathlib.Path(sysconfig.get_paths()["purelib"])
site.mkdir(parents=True, exist_ok=True)
(site / "outer.pth").write_text({outer!r})
pathlib.Path(sys.prefix, "fake-mxnet-1.8").touch()
"""


@pytest.fixture
def stored_under_old_mxnet(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> str:
    """Baselines stored at commit A under "MXNet 1.8", raised 40% (committed as B); today's
    environment has "MXNet 1.9.1". Worktrees and environments go under ``tmp_path``."""
    import site

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    fake_pytester.makeconftest(VERSIONED_CONFTEST)
    outer = "\n".join([*site.getsitepackages(), *sys.path[:1]]) + "\n"
    fake_pytester.makepyfile(make_env=MAKE_ENV.format(outer=outer))
    monkeypatch.setenv("FAKE_MXNET", "fake-1.8")
    base = store_baseline(PAIR_SUITE.format(speed=100.0))
    monkeypatch.delenv("FAKE_MXNET")
    inflate_baselines(fake_pytester.path, 1.4)
    commit("B: baselines from a faster machine, under MXNet 1.8")
    return base


def test_a_pair_in_the_baselines_environment_judges_code_and_software_together(
    fake_pytester: pytest.Pytester, stored_under_old_mxnet: str, tmp_path: Path
) -> None:
    # Today's environment: the pair clears the code, the MXNet change stays the suspect.
    today = fake_pytester.runpytest("--mxperf")
    today.assert_outcomes(failed=2)
    today.stdout.fnmatch_lines(
        [
            "*cleared the code*, so the drop comes from what changed since the baseline: "
            "mxnet: fake-1.8 -> fake-1.9.1*"
        ]
    )
    assert "the sides ran different software" not in today.stdout.str()
    # The baseline side in the baseline commit's own environment ("MXNet 1.8"): the pair
    # covers code and software, finds no loss, so the stored figure does not hold here.
    command = "{python} {wt}/make_env.py"
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-env-command", command, "--mxperf-json", "report.json"
    )
    result.assert_outcomes(passed=2)
    verdicts = {c["model"]: c["verdict"] for c in read_report(fake_pytester.path)["cases"]}
    assert {m: v["status"] for m, v in verdicts.items()} == {"fast": "machine", "steady": "machine"}
    assert (
        "changed since the baseline: mxnet: fake-1.8 -> fake-1.9.1" in verdicts["fast"]["message"]
    )
    assert (
        f"\nthe sides ran different software (baseline commit {stored_under_old_mxnet[:10]} -> "
        "HEAD): mxnet: fake-1.8 -> fake-1.9.1" in verdicts["fast"]["message"]
    )
    # One environment for the revision, reused by the second case, left in the cache.
    (built,) = list((tmp_path / "tmp").glob("pytest-mxperf-cache-*/envs/*"))
    assert built.name.startswith(stored_under_old_mxnet[:12])
    assert (built / "fake-mxnet-1.8").exists()
    # Paired mode across environments says what each side ran as well.
    paired_run = fake_pytester.runpytest(
        "--mxperf",
        "--mxperf-ab",
        "HEAD~1",
        "--mxperf-env-command",
        command,
        "--mxperf-json",
        "ab.json",
    )
    paired_run.assert_outcomes(passed=2)
    for case in read_report(fake_pytester.path, "ab.json")["cases"]:
        assert case["verdict"]["status"] == "pass"
        assert (
            "\nthe sides ran different software (HEAD~1 -> HEAD): mxnet: fake-1.8 -> fake-1.9.1"
            in case["verdict"]["message"]
        )


def test_an_environment_that_cannot_be_built_is_a_clear_error(
    fake_pytester: pytest.Pytester, stored_under_old_mxnet: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command fails, not the environment: no pip to seed into it (the test above builds
    # one as users get it, with pip).
    monkeypatch.setattr(envs, "ensure_env", functools.partial(envs.ensure_env, with_pip=False))
    command = "no-such-program-for-mxperf {wt}"
    # Arbitration: the stored judgement stands, saying why no pair could confirm it.
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-env-command", command, "--mxperf-json", "report.json"
    )
    result.assert_outcomes(failed=2)
    assert "Traceback" not in result.stdout.str()
    for case in read_report(fake_pytester.path)["cases"]:
        message = case["verdict"]["message"]
        assert case["verdict"]["status"] == "regressed"
        assert (
            f"not confirmed by a paired run: revision {stored_under_old_mxnet[:10]} cannot "
            "be measured here: building the environment" in message
        )
        assert "no-such-program-for-mxperf" in message
    # Paired mode: a usage error naming the revision and the failed build, not a traceback.
    paired_run = fake_pytester.runpytest(
        "--mxperf", "--mxperf-ab", "HEAD~1", "--mxperf-env-command", command
    )
    assert paired_run.ret == pytest.ExitCode.USAGE_ERROR
    paired_run.stderr.fnmatch_lines(
        [
            "*mxperf: --mxperf-ab HEAD~1: revision * cannot be measured here: building the "
            "environment of revision * could not start*"
        ]
    )
    assert len(worktrees(fake_pytester.path)) == 1
