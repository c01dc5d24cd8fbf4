"""The one atomic writer: whole files only, readable like any file the user writes, nothing left
behind when a write fails."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from pytest_mxperf.system import files


def test_json_is_sorted_and_the_folder_is_made(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    files.write_json_atomic(path, {"b": 1, "a": 2})
    assert path.read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'


def test_the_file_gets_the_users_mode_not_mkstemps(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        files.write_text_atomic(tmp_path / "t.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "t.txt").stat().st_mode & 0o777 == 0o644


def test_a_failed_replace_keeps_the_old_target_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()  # os.replace of a file onto a directory fails
    (target / "kept").write_text("old")
    with pytest.raises(OSError):
        files.write_text_atomic(target, "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (target / "kept").read_text() == "old"


def test_nan_is_refused_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        files.write_json_atomic(tmp_path / "n.json", {"x": float("nan")})
    assert list(tmp_path.iterdir()) == []
    files.write_json_atomic(tmp_path / "n.json", {"x": float("nan")}, allow_nan=True)
    assert json.loads((tmp_path / "n.json").read_text())["x"] != 0


# Output paths that are not regular files are written through, never replaced (issue #49).


def test_a_symlink_stays_a_link_and_its_target_gets_the_text(tmp_path: Path) -> None:
    target = tmp_path / "real" / "report.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    files.write_json_atomic(link, {"a": 1})
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert json.loads(target.read_text()) == {"a": 1}
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]  # no temporary


def test_a_dangling_symlink_gets_its_target_made(tmp_path: Path) -> None:
    link = tmp_path / "out.md"
    link.symlink_to(tmp_path / "made.md")
    files.write_text_atomic(link, "text\n")
    assert link.is_symlink()
    assert (tmp_path / "made.md").read_text() == "text\n"


def test_a_fifo_is_written_in_place_for_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    opened = threading.Event()

    def read() -> None:
        with open(fifo, "rb") as fh:  # blocks until the writer opens it
            opened.set()
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 10
    while True:  # the writer refuses a FIFO with no reader yet: wait for the reader's open
        try:
            files.write_text_atomic(fifo, "through the pipe\n")
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    reader.join(timeout=10)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not a regular file


def test_a_fifo_nobody_reads_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="no process reads"):
        files.write_text_atomic(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def _null_device(tmp_path: Path) -> Path:
    """A character device to write to: as root, a private node of /dev/null's device (a
    writer that replaced it, as root, would otherwise replace the machine's /dev/null);
    /dev/null itself for other users, who cannot replace it."""
    if os.geteuid() != 0:
        return Path("/dev/null")
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.stat("/dev/null").st_rdev)
    return node


def test_a_character_device_is_written_not_replaced(tmp_path: Path) -> None:
    device = _null_device(tmp_path)
    before = os.stat(device)
    files.write_json_atomic(device, {"a": 1})
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_a_socket_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(OSError, match="a socket"):
            files.write_text_atomic(path, "x")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_symlink_another_user_made_in_a_sticky_directory_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    target = tmp_path / "victim.txt"
    target.write_text("keep")
    link = shared / "pytest-mxperf-report-x.json"
    link.symlink_to(target)
    files.write_text_atomic(link, "mine")  # our own link is written through
    assert target.read_text() == "mine"
    os.chown(shared, 4242, 4242)
    os.lchown(link, 4243, 4243)  # made by another user, in a directory of a third
    with pytest.raises(OSError, match="a symlink another user made"):
        files.write_text_atomic(link, "theirs")
    assert target.read_text() == "mine"
