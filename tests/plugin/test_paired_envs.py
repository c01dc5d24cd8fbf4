"""Paired runs and arbitration in the baseline commit's own environment
(``--mxperf-env-command``): code and software judged together, an environment that cannot be
built, and one that gets the plugin's own requirements installed (issue 29)."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Callable

import pytest

from pytest_mxperf.paired import envs
from pytest_mxperf.testing.repos import (
    PAIR_SUITE,
    cases_by_key,
    inflate_baselines,
    read_report,
    worktrees,
)

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
    # No pip seeded into the environments (the make_env command needs none, and the plugin's
    # requirements are found through it): test_revs_environment_gets_the_plugins_own_requirements
    # builds them as users get them, with pip.
    monkeypatch.setattr(envs, "ensure_env", functools.partial(envs.ensure_env, with_pip=False))
    fake_pytester.makeconftest(VERSIONED_CONFTEST)
    outer = "\n".join([*site.getsitepackages(), *sys.path[:1]]) + "\n"
    fake_pytester.makepyfile(make_env=MAKE_ENV.format(outer=outer))
    monkeypatch.setenv("FAKE_MXNET", "fake-1.8")
    base = store_baseline(PAIR_SUITE.format(speed=100.0))
    monkeypatch.delenv("FAKE_MXNET")
    inflate_baselines(fake_pytester.path, 1.4)
    # A file beside them too: with only baseline files changed, the code is A's and no pair
    # runs (tests/plugin/test_same_code.py); here a pair is what is tested.
    (fake_pytester.path / "NOTES.md").write_text("B\n")
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
    # The command fails, not the environment (built without pip, see stored_under_old_mxnet).
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


def test_same_code_under_other_software_is_paired_only_in_the_baselines_environment(
    fake_pytester: pytest.Pytester, stored_under_old_mxnet: str, commit: Callable[[str], str]
) -> None:
    (fake_pytester.path / "NOTES.md").unlink()
    commit("C: only the baselines differ from A")
    # Today's environment: no pair (it would measure the same code twice); the change is named.
    today = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    today.assert_outcomes(failed=2)
    today.stdout.fnmatch_lines(
        [
            f"*the code is the baseline commit {stored_under_old_mxnet[:10]}'s (only baseline "
            "files differ), so the drop comes from what changed since the baseline: mxnet: "
            "fake-1.8 -> fake-1.9.1*"
        ]
    )
    assert "paired run" not in today.stdout.str()
    # In the baseline commit's own environment a pair judges the software: no loss, machine.
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-env-command", "{python} {wt}/make_env.py", "--mxperf-json", "r.json"
    )
    result.assert_outcomes(passed=2)
    cases = read_report(fake_pytester.path, "r.json")["cases"]
    assert {c["verdict"]["status"] for c in cases} == {"machine"}
    assert all("img/s per round (baseline commit/HEAD)" in c["verdict"]["message"] for c in cases)


# REV's own environment lacks the plugin's requirements -----------------------------------------

GOOD = """
def test_model(mxperf):
    mxperf.callable(lambda: 1, items_per_call=8, model="model")
"""


def _paired(pytester: pytest.Pytester, rev: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--mxperf", "--mxperf-ab", rev, "--mxperf-json", "report.json", *args)


# Run by --mxperf-env-command in REV's new environment: it sees this environment's packages
# through a directory that lacks the plugin's own tabulate and GitPython, and the plugin itself
# (a user's requirements.txt that names MXNet, numpy and pytest, not what the plugin needs).
WITHOUT_PLUGIN_DEPS = """
import pathlib, sysconfig
site = pathlib.Path(sysconfig.get_paths()["purelib"])
site.mkdir(parents=True, exist_ok=True)
(site / "outer.pth").write_text({outer!r} + "\\n")
"""
MISSING = ("tabulate", "GitPython")
#: Not installed in REV's environment either (its entry point registers the plugin here).
NOT_THERE = ("pytest-mxperf",)


def _without(missing: Sequence[str], into: Path) -> None:
    """``into``: links to everything this environment's site-packages hold but ``missing``."""
    import site

    into.mkdir()
    names = [*missing, *NOT_THERE]
    skip = {importlib.metadata.distribution(n).metadata["Name"].lower() for n in names}
    skip |= {s.replace("-", "_") for s in skip}
    tops = {"__editable__"}
    for name in missing:
        dist = importlib.metadata.distribution(name)
        tops |= {f.parts[0] for f in dist.files or () if f.parts[0] != ".."}
    for base in map(Path, site.getsitepackages()):
        for entry in base.iterdir():
            lowered = entry.name.lower()
            if entry.name in tops or any(lowered.startswith(s + "-") for s in skip):
                continue
            if lowered.startswith("__editable__"):
                continue
            if not (into / entry.name).exists():
                (into / entry.name).symlink_to(entry)


def _wheels(names: Sequence[str], into: Path) -> None:
    """Wheels of installed distributions, for an offline ``pip install`` (``PIP_FIND_LINKS``)."""
    into.mkdir()
    for name in names:
        dist = importlib.metadata.distribution(name)
        norm = dist.metadata["Name"].lower().replace("-", "_")
        with zipfile.ZipFile(into / f"{norm}-{dist.version}-py3-none-any.whl", "w") as whl:
            for file in dist.files or ():
                if file.parts[0] != ".." and "__pycache__" not in file.parts:
                    whl.write(file.locate(), file.as_posix())


def test_revs_environment_gets_the_plugins_own_requirements(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outer = tmp_path / "outer"
    _without(MISSING, outer)
    _wheels(MISSING, tmp_path / "wheels")
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: pip finds them among these wheels
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    fake_pytester.makepyfile(test_suite=GOOD, make_env=WITHOUT_PLUGIN_DEPS.format(outer=str(outer)))
    commit("base")
    commit("HEAD")
    # Without the plugin's requirements REV's side cannot start: an error saying why. (Nothing
    # to install, so its environment needs no pip: seeding one costs seconds, paid below.)
    with monkeypatch.context() as without:
        without.setattr(envs, "plugin_requirements", lambda: [])
        without.setattr(envs, "ensure_env", functools.partial(envs.ensure_env, with_pip=False))
        bare = _paired(fake_pytester, "HEAD~1", "--mxperf-env-command", "{python} {wt}/make_env.py")
    bare.assert_outcomes(failed=1)
    (case,) = cases_by_key(fake_pytester.path).values()
    assert case["verdict"]["status"] == "error"
    assert "No module named 'tabulate'" in case["verdict"]["message"]
    for env in Path(os.environ["TMPDIR"]).glob("pytest-mxperf-cache-*/envs/*"):
        shutil.rmtree(env)
    result = _paired(fake_pytester, "HEAD~1", "--mxperf-env-command", "{python} {wt}/make_env.py")
    result.assert_outcomes(passed=1)
    (case,) = cases_by_key(fake_pytester.path).values()
    assert case["verdict"]["status"] == "pass", case["verdict"]["message"]
    result.stdout.fnmatch_lines(
        [
            "*mxperf: building the environment of revision * ('{python} {wt}/make_env.py'; *",
            "*mxperf: the environment of revision * built in * s*",
        ]
    )
    (env,) = Path(os.environ["TMPDIR"]).glob("pytest-mxperf-cache-*/envs/*")
    python = env / "bin" / "python"
    found = subprocess.run(
        [str(python), "-c", "import tabulate, git; print(tabulate.__file__, git.__file__)"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert found.returncode == 0, found.stderr
    assert str(outer) not in found.stdout  # installed into the environment itself
    # A second run reuses the environment: no build line.
    again = _paired(fake_pytester, "HEAD~1", "--mxperf-env-command", "{python} {wt}/make_env.py")
    again.assert_outcomes(passed=1)
    assert "building the environment" not in again.stdout.str()
