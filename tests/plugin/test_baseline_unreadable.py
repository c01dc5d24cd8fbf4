"""Baseline files that are not text, JSON nested without end, a commit date that is no date, a
runaway size (issue #49): each is the named, never-rewritten bad file a truncated one is, in
``pytest --mxperf`` and every ``mxperf`` command."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_mxperf import cli
from pytest_mxperf.baselines import store
from pytest_mxperf.testing.repos import git, store_speeds, stored_files


def _not_utf8(path: Path) -> bytes:
    return b"\xff\xfe{"


def _deep(path: Path) -> bytes:
    return b"[" * 200_000 + b"]" * 200_000


def _bad_date(path: Path) -> bytes:
    data = json.loads(path.read_text())
    data["commit"]["date"] = "last tuesday"
    return json.dumps(data).encode()


def _oversized(path: Path) -> bytes:
    # Valid JSON, padded past the size a baseline file may have.
    return path.read_bytes() + b" " * store.MAX_FILE_BYTES


SPOILERS: dict[str, tuple[Callable[[Path], bytes], str]] = {
    "not-utf8": (_not_utf8, "is not UTF-8 text (byte 0xff at offset 0)"),
    "nested-200000": (_deep, "is not valid JSON (nested too deeply)"),
    "date-not-iso": (_bad_date, ": 'commit.date' must be an ISO date, got 'last tuesday'"),
    "oversized": (_oversized, "MiB, over the 8 MiB a baseline file may hold"),
}


@pytest.mark.parametrize("kind", sorted(SPOILERS))
def test_pytest_names_the_file_and_never_rewrites_it(
    stored_suite: pytest.Pytester, kind: str
) -> None:
    spoil, said = SPOILERS[kind]
    path = stored_files(stored_suite.path)[0]
    bad = spoil(path)
    path.write_bytes(bad)
    result = stored_suite.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines([f"*mxperf: error: baseline file {path}*"])
    assert said in result.stdout.str()
    update = stored_suite.runpytest("--mxperf", "--mxperf-update")
    assert update.ret == pytest.ExitCode.TESTS_FAILED
    update.stdout.fnmatch_lines([f"*baseline not written: *baseline file {path}*"])
    assert path.read_bytes() == bad


@pytest.mark.parametrize("kind", sorted(SPOILERS))
def test_mxperf_commands_skip_it_or_name_it(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    spoil, said = SPOILERS[kind]
    store_speeds(suite, alpha=400, beta=200)
    good = git(suite.path, "rev-parse", "HEAD~1")
    (path,) = stored_files(suite.path)
    bad_path = path.parent / ("ab" * 20 + ".json")
    bad_path.write_bytes(spoil(path))
    root = str(suite.path / "baselines")
    capsys.readouterr()
    assert cli.main(["--dir", root, "list"]) == 0
    out = capsys.readouterr().out
    assert f"unreadable: baseline file {bad_path}" in out and said in out
    for argv in (["show", good[:10]], ["compare", good[:10], good[:10]]):
        assert cli.main(["--dir", root, *argv]) == 0, argv
        err = capsys.readouterr().err
        assert f"skipped: baseline file {bad_path}" in err and said in err, argv
    for argv in (["show", "abab"], ["compare", good[:10], "abab"]):
        assert cli.main(["--dir", root, *argv]) == 2, argv
        assert f"mxperf: error: baseline file {bad_path}" in capsys.readouterr().err
    if importlib.util.find_spec("plotly") is not None:  # the [report] extra
        page = suite.path / "page.html"
        assert cli.main(["report", "--dir", root, "--out", str(page)]) == 0
        out = capsys.readouterr().out
        assert f"note: baseline file {bad_path}" in out and said in out
        assert page.is_file()
