"""Paired runs (``--mxperf-ab``), reliability round 3 (issue 29): errors on either side, a
collection error elsewhere, the CPU lock, usage errors and REV's own environment."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_mxperf.system import locks, scratch
from pytest_mxperf.testing.repos import cases_by_key


def _cases(pytester: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    return cases_by_key(pytester.path, name)


def _paired(pytester: pytest.Pytester, rev: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--mxperf", "--mxperf-ab", rev, "--mxperf-json", "report.json", *args)


GOOD = """
from pytest_mxperf.testing import FakeModel

def test_model(mxperf):
    mxperf.callable(lambda: 1, items_per_call=8, model="model")
"""

# The working tree breaks the model's forward: every call raises.
BROKEN = """
def forward():
    raise ValueError("working tree breaks forward")

def test_model(mxperf):
    mxperf.callable(forward, items_per_call=8, model="model")
"""


def test_a_working_tree_whose_benchmark_errors_fails_its_paired_test(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("base")
    fake_pytester.makepyfile(test_suite=BROKEN)  # uncommitted
    result = _paired(fake_pytester, "HEAD")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (case,) = _cases(fake_pytester).values()
    assert case["status"] == "error"
    assert case["verdict"]["status"] == "error"
    message = case["verdict"]["message"]
    assert "working tree breaks forward" in message
    assert "does not exist there" not in message
    result.stdout.fnmatch_lines(["*side measured nothing in rounds 1, 2: *working tree breaks*"])


def test_an_error_on_revs_side_is_an_error_too(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=BROKEN)
    commit("broken base")
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("fixed")
    result = _paired(fake_pytester, "HEAD~1")
    result.assert_outcomes(failed=1)
    (case,) = _cases(fake_pytester).values()
    assert case["verdict"]["status"] == "error"
    assert "HEAD~1's side measured nothing in rounds 1, 2: " in case["verdict"]["message"]


# HEAD's data-parallel case: its ranks die in the second round only (a counter file).
DP_FLAKY = """
from pathlib import Path
from pytest_mxperf.testing import FakeModel

COUNTER = Path({counter!r})

def toy():
    runs = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(runs + 1))
    return FakeModel(300.0, scaling=0.9, rank_failure="rank died" if runs == 1 else None)

def test_dist(mxperf):
    mxperf.data_parallel("test_suite:toy", batch_size=8, workers=2, model="toy")
"""
DP_GOOD = """
from pytest_mxperf.testing import FakeModel

def toy():
    return FakeModel(300.0, scaling=0.9)

def test_dist(mxperf):
    mxperf.data_parallel("test_suite:toy", batch_size=8, workers=2, model="toy")
"""


def test_a_data_parallel_case_heads_side_measured_nothing_in_a_round_is_an_error(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], tmp_path: Path
) -> None:
    fake_pytester.makepyfile(test_suite=DP_GOOD)
    commit("base")
    counter = tmp_path / "head-runs"
    fake_pytester.makepyfile(test_suite=DP_FLAKY.format(counter=str(counter)))
    result = _paired(fake_pytester, "HEAD", "--mxperf-pair-lockstep", "off")
    result.assert_outcomes(failed=1)
    (case,) = _cases(fake_pytester).values()
    assert case["verdict"]["status"] == "error"
    assert "side measured nothing in round 2: " in case["verdict"]["message"]
    assert "rank died" in case["verdict"]["message"]


def test_an_empty_revision_is_a_usage_error_naming_the_option(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("base")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-ab=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid value '' for command line option --mxperf-ab*empty*"])


def test_a_dirty_tree_is_named_the_working_tree_not_head(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("base")
    fake_pytester.makepyfile(test_suite=GOOD + "\n# an uncommitted change\n")
    result = _paired(fake_pytester, "HEAD")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*paired run vs HEAD: round 1, rev (HEAD); *"])
    result.stdout.fnmatch_lines(["*paired run vs HEAD: round 2, head (the working tree); *"])
    (case,) = _cases(fake_pytester).values()
    message = case["verdict"]["message"]
    assert "the working tree vs HEAD: " in message
    assert "img/s per round (HEAD/the working tree): " in message
    assert "HEAD vs HEAD" not in message


def test_a_collection_error_elsewhere_stops_before_any_round(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=GOOD, test_broken="import no_such_module_for_mxperf\n")
    commit("base")
    result = _paired(fake_pytester, "HEAD")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*mxperf: paired run vs HEAD not started: 1 error(s) during collection*"]
    )
    assert "round 1" not in result.stdout.str()
    # --continue-on-collection-errors: the rounds run, the benchmark is judged.
    going_on = _paired(fake_pytester, "HEAD", "--continue-on-collection-errors")
    going_on.assert_outcomes(passed=1, errors=1)
    going_on.stdout.fnmatch_lines(["*paired run vs HEAD: round 1, *"])


@pytest.mark.parametrize("option", ["-k", "-m"])
def test_a_bad_selection_expression_is_a_usage_error_before_any_round(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str], option: str
) -> None:
    # pytest calls pytest_collection_finish even when -k or -m fails to parse, with every test
    # still collected; the pair measured them all before the usage error was shown.
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("base")
    result = _paired(fake_pytester, "HEAD", option, "case and workers=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*Wrong expression passed to '{option}'*"])
    assert "round 1" not in result.stdout.str()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="flock device locks need a POSIX system")
def test_a_paired_run_that_has_to_wait_for_the_cpu_lock_says_so(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("base")
    tmp = Path(os.environ["TMPDIR"])  # fake_pytester's own: its lock directory is ours alone
    lock = tmp / f"pytest-mxperf-{os.getuid()}" / "cpu.lock"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONUNBUFFERED"] = "1"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--mxperf"]
    argv += ["--mxperf-ab", "HEAD", "--mxperf-rounds", "2", "--mxperf-max-rounds", "2"]
    with locks.exclusive(lock):  # this process is measuring: the paired run waits its turn
        run = subprocess.Popen(
            argv,
            cwd=fake_pytester.path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=0,
        )
        assert run.stdout is not None
        told, lines = None, []
        deadline = time.monotonic() + 120
        while told is None and time.monotonic() < deadline and run.poll() is None:
            if select.select([run.stdout], [], [], 1.0)[0]:
                line = run.stdout.readline().decode()
                lines.append(line)
                if "waiting for the cpu lock" in line:
                    told = line
        if told is None:
            run.kill()
            run.communicate()
        assert told is not None, "".join(lines)
    out, _ = run.communicate(timeout=120)  # the lock is free now: the rounds run
    assert run.returncode == 0, out.decode()
    assert told.startswith("mxperf: paired run vs HEAD: waiting for the cpu lock: ")
    assert f"another pytest --mxperf run on this machine is measuring (pid {os.getpid()})" in told


# Ends REV's side with exit code 1 (as a failed import in its bootstrap would) after a line of
# output, before it writes any results.
DIES_AT_START = """
import os

def pytest_configure(config):
    config.pluginmanager.getplugin("capturemanager").stop_global_capturing()
    print("Traceback: REV's side cannot start: the last words", flush=True)
    os._exit(1)
"""


def test_a_side_that_dies_at_start_shows_its_last_output_lines(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    conftest = (fake_pytester.path / "conftest.py").read_text()
    fake_pytester.makepyfile(test_suite=GOOD)
    fake_pytester.makeconftest(conftest + DIES_AT_START)
    commit("REV's side ends before pytest collects anything")
    fake_pytester.makeconftest(conftest)
    commit("HEAD")
    result = _paired(fake_pytester, "HEAD~1")
    # REV's side could not run: the case is an error, not "new" (nor a pass).
    result.assert_outcomes(failed=1)
    (case,) = _cases(fake_pytester).values()
    message = case["verdict"]["message"]
    assert case["verdict"]["status"] == "error"
    assert "HEAD~1's side measured nothing in rounds 1, 2: the side process exited with " in (
        message
    )
    assert "the last lines of its output:" in message
    assert "Traceback: REV's side cannot start: the last words" in message
    assert "No such file or directory" not in message


def test_a_paired_run_leaves_no_empty_cache_directory(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("base")
    commit("HEAD")
    _paired(fake_pytester, "HEAD~1").assert_outcomes(passed=1)
    tmp = Path(os.environ["TMPDIR"])
    # (The per-user scratch directory stays, as the lock directory it is in does.)
    left = [p for p in tmp.rglob("*") if p.is_dir() and not any(p.iterdir())]
    assert left == [scratch.root(tmp)]
    assert not list(tmp.glob("pytest-mxperf-cache-*"))


def test_a_case_rev_does_not_have_is_measured_once_at_head(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_other=GOOD.replace('model="model"', 'model="other"'))
    commit("base: no test_suite.py")
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("HEAD adds a benchmark")
    result = _paired(fake_pytester, "HEAD~1")
    result.assert_outcomes(passed=2)
    cases = _cases(fake_pytester)
    assert cases["model/inference/float32/bs8/cpu"]["verdict"]["status"] == "new"
    assert cases["other/inference/float32/bs8/cpu"]["verdict"]["status"] == "pass"
    rounds = json.loads((fake_pytester.path / "report.json").read_text())["paired"]["rounds"]
    heads = [r["head"]["images_per_sec"] for r in rounds]
    assert ["model/inference/float32/bs8/cpu" in h for h in heads] == [True] + [False] * (
        len(heads) - 1
    )
    assert len(heads) >= 2  # the paired case got its rounds
    # Nothing at REV at all: one HEAD-only round, not three.
    fake_pytester.makepyfile(test_other=GOOD.replace('model="model"', 'model="new"'))
    commit("a case of another name")
    only_head = _paired(fake_pytester, "HEAD~1", "test_other.py")
    only_head.assert_outcomes(passed=1)
    rounds = json.loads((fake_pytester.path / "report.json").read_text())["paired"]["rounds"]
    assert len(rounds) == 1


SYNTAX_ERROR = GOOD + "\ndef broken(:\n    pass\n"


def test_revs_collection_error_is_shown_once_whole_and_not_rerun(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(test_suite=SYNTAX_ERROR)
    commit("REV cannot collect")
    fake_pytester.makepyfile(test_suite=GOOD)
    commit("fixed")
    result = _paired(fake_pytester, "HEAD~1")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*mxperf: paired run vs HEAD~1: HEAD~1's side could not collect test_suite.py; *"]
    )
    assert out.count("side could not collect") == 1
    (case,) = _cases(fake_pytester).values()
    message = case["verdict"]["message"]
    assert case["verdict"]["status"] == "new"
    assert "<frozen importlib" not in message and "<frozen importlib" not in out
    (syntax,) = [line for line in message.splitlines() if "SyntaxError: " in line]
    assert syntax.rstrip().endswith(("invalid syntax", "expected ':'", "expected ')'"))
    rounds = json.loads((fake_pytester.path / "report.json").read_text())["paired"]["rounds"]
    assert len(rounds) == 1  # REV is not asked again to collect what it cannot


DP_RECORDED = """
import os
import time
from pathlib import Path
from pytest_mxperf.testing import FakeModel

def toy():
    # The fake launch's span, as the ranks' would be: start, set-up, end (one line a launch).
    start = time.monotonic()
    time.sleep(0.4)
    with open(Path(os.environ["MXPERF_TEST_LAUNCHES"]), "a") as fh:
        fh.write(f"{os.getpid()} {start} {time.monotonic()}\\n")
    return FakeModel(300.0, scaling=0.9)

def test_dist(mxperf):
    mxperf.data_parallel("test_suite:toy", batch_size=8, workers=2, model="toy")
"""


def test_paired_data_parallel_launches_of_the_two_sides_never_overlap(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "launches.txt"
    monkeypatch.setenv("MXPERF_TEST_LAUNCHES", str(log))
    fake_pytester.makepyfile(test_suite=DP_RECORDED)
    commit("base")
    commit("HEAD")
    rounds = ("--mxperf-rounds", "2", "--mxperf-max-rounds", "2")
    _paired(fake_pytester, "HEAD~1", *rounds).assert_outcomes(passed=1)
    spans = sorted(
        (float(start), float(end), pid)
        for pid, start, end in (line.split() for line in log.read_text().splitlines())
    )
    assert len(spans) == 4 and len({pid for _, _, pid in spans}) == 4  # 2 sides x 2 rounds
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        assert end <= start, f"two sides' launches ran at once: {spans}"
