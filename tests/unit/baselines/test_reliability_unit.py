"""Issue 29 (reliability, round 3): the pure parts of its fixes."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf import cli
from pytest_mxperf.baselines import store as baselines
from pytest_mxperf.baselines.resolution import resolve
from pytest_mxperf.config import options, parsers
from pytest_mxperf.pipelines import imagedata
from pytest_mxperf.reporting import historygit
from pytest_mxperf.system import mxnet_env
from pytest_mxperf.testing.repos import git


# Item 14: MXNet aborts the process (dmlc::ParamError, exit 134) on a thread variable that is
# not an int; OpenMP ignores one that is not positive.
@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OMP_NUM_THREADS": "abc"}, "OMP_NUM_THREADS='abc'"),
        ({"OMP_NUM_THREADS": "4,2"}, "OMP_NUM_THREADS='4,2'"),
        ({"OMP_NUM_THREADS": "2.5"}, "OMP_NUM_THREADS='2.5'"),
        ({"OMP_NUM_THREADS": "0"}, "OMP_NUM_THREADS='0'"),
        ({"OMP_NUM_THREADS": "-1"}, "OMP_NUM_THREADS='-1'"),
        ({"MXNET_OMP_MAX_THREADS": "abc"}, "MXNET_OMP_MAX_THREADS='abc'"),
    ],
)
def test_a_thread_variable_mxnet_cannot_read_is_named(env: dict[str, str], named: str) -> None:
    problem = mxnet_env.env_problem(env)
    assert problem is not None and named in problem
    assert "whole number in [1, 4096]" in problem


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OMP_NUM_THREADS": "4"},
        {"OMP_NUM_THREADS": " 2 "},
        {"OMP_NUM_THREADS": ""},
        {"MXNET_OMP_MAX_THREADS": "8"},
    ],
)
def test_thread_variables_mxnet_reads_pass(env: dict[str, str]) -> None:
    assert mxnet_env.env_problem(env) is None


# Item 15: --mxperf-pipeline-timeout inf was accepted, then every pipeline case failed with
# "OverflowError: timestamp out of range for platform time_t".
@pytest.mark.parametrize("text", ["inf", "Infinity", "nan", "-inf", "1e300", "604801", "0", "-1"])
def test_seconds_refuse_non_finite_and_absurd_values(text: str) -> None:
    with pytest.raises(ValueError, match="seconds"):
        parsers.positive_seconds(text)


@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), ("60", 60.0), ("604800", 604800.0)])
def test_seconds_take_finite_positive_values(text: str, value: float) -> None:
    assert parsers.positive_seconds(text) == value


def test_every_seconds_option_uses_the_seconds_parser() -> None:
    timed = [s.name for s in options.SPECS if s.metavar == "SECONDS"]
    assert "pipeline_timeout" in timed and "dist_timeout" in timed
    assert all(s.parse is parsers.positive_seconds for s in options.SPECS if s.name in timed)


@pytest.mark.parametrize("text", ["inf", "nan"])
def test_a_positive_float_is_finite(text: str) -> None:
    with pytest.raises(ValueError, match="finite"):
        parsers.positive_float(text)


# --- mxperf report (items 5, 12, 19) ----------------------------------------------------------

KEY = "toy/inference/float32/bs8/cpu"


@pytest.fixture
def stored_repo(tmp_path: Path) -> Path:
    """A repository named ``perf-suite`` (origin ``git@example.invalid:team/perf-suite.git``)
    with one stored baseline at HEAD; returns its baseline directory."""
    repo = tmp_path / "home" / "someone" / "perf-suite"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "git@example.invalid:team/perf-suite.git")
    (repo / "model.py").write_text("# model\n")
    git(repo, "add", "model.py")
    git(repo, "commit", "-q", "-m", "model")
    sha = git(repo, "rev-parse", "HEAD")
    commit = {"sha": sha, "date": "2025-03-01T12:00:00+00:00", "branch": "main", "dirty": False}
    case = {"images_per_sec": 100.0, "rel_iqr": 0.01, "iqr": 1.0, "model": "toy"}
    case.update(mode="inference", dtype="float32", batch_size=8, device_kind="cpu", status="ok")
    baselines.store(repo / "baselines", "cpu-test-2c", commit, {KEY: case})
    return repo / "baselines"


def test_the_history_page_names_the_repository_never_a_path(
    stored_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "page.html"
    assert cli.main(["--dir", str(stored_repo.resolve()), "report", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert str(tmp_path) not in page
    assert "someone" not in page
    assert "repository <code>team/perf-suite</code>" in page
    assert "Baselines: <code>baselines</code>" in page


@pytest.mark.parametrize(
    ("origin", "name"),
    [
        (None, "perf-suite"),
        ("git@github.com:team/perf-suite.git", "team/perf-suite"),
        ("https://user:token@github.com/team/perf-suite.git", "team/perf-suite"),
        ("https://gitlab.example.com/group/sub/perf-suite", "sub/perf-suite"),
        ("/srv/git/perf-suite.git", "perf-suite"),
        ("file:///srv/git/perf-suite.git", "perf-suite"),
    ],
)
def test_a_repository_name_holds_no_path_or_credentials(origin: str | None, name: str) -> None:
    assert historygit.repository_name("/home/someone/perf-suite", origin) == name


def _report(root: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["--dir", str(root), "report", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_report_out_onto_a_directory_is_a_clear_error_leaving_nothing(
    stored_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "site"
    target.mkdir()
    code, _, err = _report(stored_repo, "--out", str(target), capsys=capsys)
    assert code == 2
    assert err.strip() == f"mxperf: error: --out: cannot write {target} ({target} is a directory)"
    assert _leftovers(tmp_path) == []


def test_report_out_under_a_file_is_a_clear_error(
    stored_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code, _, err = _report(stored_repo, "--out", str(blocker / "page.html"), capsys=capsys)
    assert code == 2
    assert "--out: cannot write" in err and "is not a directory" in err
    assert "Traceback" not in err


def test_report_out_where_writing_fails_is_a_clear_error_leaving_nothing(
    stored_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """As in /proc (root may "write" there by os.access, then the write fails)."""
    out = tmp_path / "page.html"

    def refuse(self: Path, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", lambda *a: refuse(out))
    code, _, err = _report(stored_repo, "--out", str(out), capsys=capsys)
    assert code == 2
    assert err.strip() == f"mxperf: error: --out: cannot write {out}: Permission denied"
    assert not out.exists() and _leftovers(tmp_path) == []


def test_report_in_proc_is_a_clear_error(
    stored_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    code, _, err = _report(stored_repo, "--out", "/proc/mxperf-report.html", capsys=capsys)
    assert code == 2
    assert err.startswith("mxperf: error: --out: cannot write /proc/mxperf-report.html")
    assert "Traceback" not in err


def test_report_markdown_unwritable_is_a_clear_error(
    stored_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "md"
    folder.mkdir()
    code, _, err = _report(
        stored_repo, "--out", str(tmp_path / "page.html"), "--markdown", str(folder), capsys=capsys
    )
    assert code == 2
    assert (
        err.strip() == f"mxperf: error: --markdown: cannot write {folder} ({folder} is a directory)"
    )
    assert not (tmp_path / "page.html").exists()  # refused before anything is written


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("value", ["-1", "nan", "inf", "1.5"])
def test_a_tolerance_that_is_no_fraction_is_refused(
    command: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["report", f"--tolerance={value}"] if command == "report" else ["compare", "a", "b"]
    if command == "compare":
        args.append(f"--tolerance={value}")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--dir", str(tmp_path), *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--tolerance: must be a fraction in [0, 1), e.g. 0.15 for 15%, got {value!r}" in err


# Item 13: after a history rewrite the stored baselines were silently ignored.
def test_stored_baselines_that_are_no_ancestor_are_named(tmp_path: Path) -> None:
    hw = "cpu-test-2c"
    case = {"images_per_sec": 100.0, "rel_iqr": 0.01, "iqr": 1.0, "status": "ok"}
    for sha, day in (("a" * 40, 1), ("b" * 40, 2), ("c" * 40, 3), ("d" * 40, 4)):
        commit = {"sha": sha, "date": f"2025-03-0{day}T12:00:00+00:00", "branch": "main"}
        baselines.store(tmp_path, hw, commit, {KEY: case})
    baselines.store(tmp_path, "gpu-other-x1", {"sha": "e" * 40, "date": "2025-03-05"}, {KEY: case})
    res = resolve(tmp_path, {"f" * 40: 0}, this_machine=[hw, "gpu-not-stored-x1"])
    assert res.refs[hw] == {}
    assert res.warnings == [
        f"4 stored baseline(s) for {hw}, but none is an ancestor of HEAD (history rewritten, "
        "or stored on another branch): its cases are judged as new; newest: dddddddddd "
        "(2025-03-04), cccccccccc (2025-03-03), bbbbbbbbbb (2025-03-02) and 1 more; compare "
        "with one by --mxperf-compare SHA"
    ]
    # Issue 49 item 5: an older ancestor holding the case is used, and the newer files it
    # passes over are said; the newest an ancestor, or other machines' keys: nothing to say.
    assert resolve(tmp_path, {"a" * 40: 3}, this_machine=[hw]).warnings == [
        f"the newest stored baseline for {hw}, dddddddddd (2025-03-04), is not an ancestor of "
        "HEAD (history rewritten, or stored on another branch): cases are compared with the "
        "nearest ancestor's, aaaaaaaaaa (2025-03-01); compare with another by --mxperf-compare SHA"
    ]
    assert resolve(tmp_path, {"d" * 40: 0, "a" * 40: 3}, this_machine=[hw]).warnings == []
    assert resolve(tmp_path, {"f" * 40: 0}, this_machine=["gpu-not-stored-x1"]).warnings == []


# Item 3: the suite's pipeline cases errored with ModuleNotFoundError: No module named 'PIL'.
def test_generated_images_without_pillow_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # as if pillow were not installed
    with pytest.raises(ImportError, match=r"pillow is not installed .*pip install pillow"):
        imagedata.image_jpeg(random.Random(0), 32)
