"""The directory side and rank processes put first on sys.path: the plugin, nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mxperf.system import pluginpath


def test_import_root_holds_only_the_plugins_package(tmp_path: Path) -> None:
    root = Path(pluginpath.import_root(tmp_path))
    assert [p.name for p in root.iterdir()] == ["pytest_mxperf"]
    assert (root / "pytest_mxperf").resolve() == pluginpath.package_dir()
    assert pluginpath.import_root(tmp_path) == str(root)  # made once, found again


def test_import_root_is_relinked_when_the_plugin_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(pluginpath.import_root(tmp_path))
    (root / "pytest_mxperf").unlink()
    (root / "pytest_mxperf").symlink_to(tmp_path)  # a stale link to somewhere else
    assert Path(pluginpath.import_root(tmp_path)) == root
    assert (root / "pytest_mxperf").resolve() == pluginpath.package_dir()


def test_a_process_given_the_import_root_finds_the_plugin_and_not_this_environment(
    tmp_path: Path,
) -> None:
    # Found on tox (non-editable install): the plugin's parent was this site-packages, so REV's
    # own environment imported this environment's tabulate, numpy and MXNet ahead of its own.
    root = pluginpath.import_root(tmp_path)
    probe = (
        "import sys, importlib.util as u; sys.path.insert(0, {root!r}); "
        "print(u.find_spec('pytest_mxperf') is not None, u.find_spec('tabulate') is None)"
    )
    # -S: no site-packages of this environment, as in an environment without them.
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe.format(root=root)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert out == ["True", "True"]


def test_import_root_made_by_threads_at_once(tmp_path: Path) -> None:
    # A paired run starts both sides from two threads of one process.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        roots = set(pool.map(lambda _: pluginpath.import_root(tmp_path), range(32)))
    (root,) = roots
    assert [p.name for p in Path(root).iterdir()] == ["pytest_mxperf"]
