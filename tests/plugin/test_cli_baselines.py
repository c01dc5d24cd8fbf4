"""The ``mxperf`` console script on baselines stored by real runs: list, show, compare, report,
and files it cannot read."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from pytest_mxperf import cli
from pytest_mxperf.testing.repos import (
    git,
    spoil_baseline,
    store_speeds,
    stored_files,
)


def test_console_script_list_show_compare(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    path = suite.path
    store_speeds(suite, alpha=400, beta=200)
    first = git(path, "rev-parse", "HEAD~1")
    store_speeds(suite, alpha=200, beta=210)
    second = git(path, "rev-parse", "HEAD~1")
    root = str(path / "baselines")
    os.chdir(path)
    capsys.readouterr()
    assert cli.main(["--dir", root, "list"]) == 0
    out = capsys.readouterr().out
    assert first[:10] in out and second[:10] in out and "cpu-" in out
    # Both runs were stored here: one anonymous machine id for the key.
    (summary,) = [line for line in out.splitlines() if "(all)" in line]
    assert summary.split()[2:] == ["1", "1", "machine(s)"]
    assert cli.main(["--dir", root, "show", first[:10]]) == 0
    out = capsys.readouterr().out
    assert "alpha/inference/float32/bs8/cpu" in out and "400.0" in out
    assert cli.main(["--dir", root, "compare", first[:10], second[:10]]) == 1
    out = capsys.readouterr().out
    assert "-50.0%" in out and "regressed" in out and "1 case(s) regressed" in out
    assert cli.main(["--dir", root, "compare", second[:10], first[:10]]) == 0
    assert "improved" in capsys.readouterr().out
    assert cli.main(["--dir", root, "compare", first[:10], second[:10], "--price-per-hour", "3.6"])
    # 3.6 $/h: $2.50 per million images at 400 img/s, $5.00 at 200 img/s.
    assert "$2.50 -> $5.00 (+100.0%)" in capsys.readouterr().out
    assert cli.main(["--dir", root, "show", "0000000"]) == 2
    assert "no baseline for revision '0000000'" in capsys.readouterr().err
    assert cli.main(["--dir", str(path / "nowhere"), "list"]) == 2


def test_console_script_is_installed() -> None:
    import shutil
    import subprocess
    import sys

    exe = shutil.which("mxperf") or str(Path(sys.executable).with_name("mxperf"))
    done = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "compare" in done.stdout


def test_console_script_bad_values_exit_2_naming_the_file(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    store_speeds(suite, alpha=400, beta=200)
    (path,) = stored_files(suite.path)
    spoil_baseline(path, "runs", ["many"])
    root = str(suite.path / "baselines")
    capsys.readouterr()
    for argv in (["show"], ["show", path.stem[:8]], ["compare", path.stem, path.stem]):
        assert cli.main(["--dir", root, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert f"baseline file {path}: case " in err and "'runs'" in err


def test_console_script_skips_an_unreadable_file_unless_asked_for_it(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    store_speeds(suite, alpha=400, beta=200)
    first = git(suite.path, "rev-parse", "HEAD~1")
    store_speeds(suite, alpha=200, beta=210)
    second = git(suite.path, "rev-parse", "HEAD~1")
    hw = stored_files(suite.path)[0].parent
    bad = hw / ("ab" * 20 + ".json")
    bad.write_text('{"schema": 1, "cases": {')  # truncated
    root = str(suite.path / "baselines")
    capsys.readouterr()
    assert cli.main(["--dir", root, "show", first[:10]]) == 0
    out, err = capsys.readouterr()
    assert "400.0" in out and f"mxperf: warning: skipped: baseline file {bad} is not valid" in err
    assert cli.main(["--dir", root, "show"]) == 0
    assert f"skipped: baseline file {bad}" in capsys.readouterr().err
    assert cli.main(["--dir", root, "compare", first[:10], second[:10]]) == 1  # regressed
    out, err = capsys.readouterr()
    assert "regressed" in out and f"skipped: baseline file {bad}" in err
    assert cli.main(["--dir", root, "show", "abab"]) == 2
    assert f"mxperf: error: baseline file {bad} is not valid JSON" in capsys.readouterr().err
    assert cli.main(["--dir", root, "compare", first[:10], "abab"]) == 2


def test_console_script_options_after_the_subcommand(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    store_speeds(suite, alpha=400, beta=200)
    first = git(suite.path, "rev-parse", "HEAD~1")
    (hw,) = {p.parent.name for p in stored_files(suite.path)}
    root = str(suite.path / "baselines")
    capsys.readouterr()
    assert cli.main(["show", first[:10], "--hardware", hw, "--dir", root]) == 0
    assert "400.0" in capsys.readouterr().out
    assert cli.main(["compare", first[:10], first[:10], "--dir", root, "--hardware", hw]) == 0
    assert cli.main(["list", "--dir", root]) == 0
    page = suite.path / "page.html"
    if importlib.util.find_spec("plotly") is not None:  # the [report] extra
        assert cli.main(["report", "--dir", root, "--hardware", hw, "--out", str(page)]) == 0
        assert page.is_file() and "1 hardware key(s)" in capsys.readouterr().out
        assert cli.main(["report", "--dir", root, "--hardware", "nope", "--out", str(page)]) == 2
        assert "no baselines for hardware 'nope'" in capsys.readouterr().err
    assert cli.main(["--dir", root, "show", "--hardware", "nope"]) == 2
    assert "no baselines for hardware 'nope'" in capsys.readouterr().err
