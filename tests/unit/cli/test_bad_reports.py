"""A JSON report or history file the commands cannot use (not UTF-8, nested too deeply, another
schema) is named with why, never a traceback: `comment render`, `history add`, `merge` and
`history show` read them through one reader (`reporting.jsonreport.read_report`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mxperf import cli

BAD = {
    "not-utf8.json": (b"\xff\xfe{", "codec can't decode"),
    "deep.json": (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    "future.json": (b'{"schema": 9, "cases": []}', "report schema 9 is not 1"),
    "other.json": (b'{"benchmarks": []}', "not an mxperf JSON report"),
}


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("command", ["comment render", "history add", "merge"])
def test_a_bad_report_is_named_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, command: str
) -> None:
    content, why = BAD[name]
    report = tmp_path / name
    report.write_bytes(content)
    argv = [*command.split(), str(report)]
    if command == "history add":
        argv += ["--store", str(tmp_path / "store")]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    # merge names an unreadable shard in its summary and exits 1; the others are bad input.
    assert code == (1 if command == "merge" else 2)
    said = out + err
    assert name in said and why in said
    assert "Traceback" not in said
    assert not (tmp_path / "store").exists()  # nothing stored from a bad report


def test_a_history_file_that_is_not_utf8_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "history.jsonl").write_bytes(b"\xff\xfe{")
    assert cli.main(["history", "show", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "history.jsonl" in err and "codec can't decode" in err
    assert (store / "history.jsonl").read_bytes() == b"\xff\xfe{"  # never rewritten
