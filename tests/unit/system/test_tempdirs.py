"""The plugin's roots in the shared temporary directory are this user's alone (issue #49):
made 0700, and one another user owns or could write into is refused, naming it and its owner.
(These tests run as root in CI containers: a "foreign" directory is one of ours made 0777, or
one whose owner check is told another uid.)"""

from __future__ import annotations

import functools
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_mxperf.paired import worktree
from pytest_mxperf.pipelines import imagedata
from pytest_mxperf.system import locks, scratch, tempdirs


def test_a_new_root_is_made_private(tmp_path: Path) -> None:
    path = tempdirs.private_dir(tmp_path / "root")
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert tempdirs.private_dir(path) == path  # and taken again


def test_a_root_writable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "root"
    path.mkdir()
    path.chmod(0o777)
    with pytest.raises(tempdirs.UnsafeTempDir) as caught:
        tempdirs.private_dir(path)
    assert f"the temporary directory {path} is writable by group or others (mode 0777)" in str(
        caught.value
    )
    assert f"chmod 700 {path}" in str(caught.value)


def test_a_root_of_another_user_is_refused_naming_the_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tempdirs.private_dir(tmp_path / "root")
    owner = path.stat().st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 4242)
    with pytest.raises(tempdirs.UnsafeTempDir, match=f"is owned by uid {owner}") as caught:
        tempdirs.private_dir(path)
    assert str(path) in str(caught.value) and f"(uid {owner + 4242})" in str(caught.value)


def test_a_symlinked_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "root").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(tempdirs.UnsafeTempDir, match="is a symlink"):
        tempdirs.private_dir(tmp_path / "root")


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("PYTEST_MXPERF_DATA_CACHE", raising=False)
    return tmp_path


def test_every_shared_root_is_checked(own_tmp: Path) -> None:
    uid = os.getuid()
    lock_dir = own_tmp / f"pytest-mxperf-{uid}"
    lock_dir.mkdir(mode=0o777)
    lock_dir.chmod(0o777)  # as another user who made it first would leave it
    for refused in (locks.machine_lock_dir, scratch.root):
        with pytest.raises(tempdirs.UnsafeTempDir, match=str(lock_dir)):
            refused()
    lock_dir.chmod(0o700)
    assert locks.machine_lock_dir() == lock_dir
    cache = worktree.default_cache_dir(own_tmp).parent.parent
    images = imagedata.cache_root().parent
    assert {cache.parent, images.parent} == {own_tmp}
    makers: list[tuple[Path, Callable[[], Path]]] = [
        (cache, functools.partial(worktree.default_cache_dir, own_tmp)),
        (images, imagedata.cache_root),
    ]
    for root, make in makers:
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        root.chmod(0o757)
        with pytest.raises(tempdirs.UnsafeTempDir, match=str(root)):
            make()
