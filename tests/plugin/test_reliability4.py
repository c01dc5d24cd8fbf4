"""Issue 49 (reliability, round 4) through pytester with the fake back end: MXNet's integer
environment variables, baseline warnings under ``-q``, names a case key cannot hold, markers
checked only in benchmark runs, and refusals made at configure rather than after measuring."""

from __future__ import annotations

import fnmatch
from typing import Callable

import pytest

from pytest_mxperf.testing.repos import git, read_report, stored_files

TOY = (
    "from pytest_mxperf.testing import FakeModel\n"
    "def test_toy(mxperf):\n"
    "    mxperf.inference(FakeModel(400.0), batch_size=8, model='toy')\n"
)


# Item 4: each of these ended in "Fatal Python error: Aborted" (exit 134) or passed as OOM.
@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("MXNET_CPU_WORKER_NTHREADS", "abc", "[[]1, 4096]"),
        ("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN", "abc", "[[]0, 2147483647]"),
        ("OMP_NUM_THREADS", "99999999999999999999", "[[]1, 4096]"),
        ("MXNET_CPU_PRIORITY_NTHREADS", "-5", "[[]1, 4096]"),
    ],
)
def test_an_integer_variable_mxnet_cannot_take_is_a_usage_error(
    fake_pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
    accepted: str,
) -> None:
    fake_pytester.makepyfile(TOY)
    monkeypatch.setenv(name, value)
    result = fake_pytester.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*mxperf: {name}='{value}' is not a whole number in {accepted}*"])
    # --mxperf-threads replaces the thread variables, not the others.
    result = fake_pytester.runpytest("--mxperf", "--mxperf-threads", "1")
    if name == "OMP_NUM_THREADS":
        result.assert_outcomes(passed=1)
    else:
        assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_an_absurd_thread_count_is_a_usage_error(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(TOY)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-threads", "99999999")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*99999999*--mxperf-threads*thread count in [[]1, 4096]*"])


# Item 5: store at A and B, rebase B away (B's file kept): the run compared with A, said nothing.
def test_a_newest_baseline_off_the_history_is_said_even_under_q(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_pytester.makepyfile(TOY)
    with (fake_pytester.path / ".gitignore").open("a") as ignore:
        ignore.write("baselines/\n")  # the stored files stay when history is rewritten
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T10:00:00+00:00")
    a = commit("A")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=1)
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-02T10:00:00+00:00")
    b = commit("B")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=1)
    git(fake_pytester.path, "reset", "-q", "--hard", a)  # B rebased away; its file is untracked
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-03T10:00:00+00:00")
    commit("C")
    assert len(stored_files(fake_pytester.path)) == 2
    result = fake_pytester.runpytest("--mxperf", "-q", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1)
    said = (
        f"mxperf: warning: the newest stored baseline for cpu-*, {b[:10]} (2026-01-02), is not "
        "an ancestor of HEAD (history rewritten, or stored on another branch): cases are "
        f"compared with the nearest ancestor's, {a[:10]} (2026-01-01); *--mxperf-compare SHA"
    )
    result.stdout.fnmatch_lines([said])
    report = read_report(fake_pytester.path)
    assert any(fnmatch.fnmatch(f"mxperf: warning: {w}", said) for w in report["baseline_warnings"])
    (case,) = report["cases"]
    assert case["verdict"]["baseline_commit"] == a


# Item 8: a '/' failed with a traceback from inside the plugin, an int model with TypeError,
# "x2" read back as a world size, and a newline broke the table.
NAMES = """
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize(
    "model,name",
    [("a/b", None), ("ok", "c/d"), (3, None), ("ok", "x2"), ("a\\nb", None), ("good", None)],
    ids=["slash", "name-slash", "int", "world", "newline", "good"],
)
def test_n(mxperf, model, name):
    mxperf.inference(FakeModel(400.0), batch_size=8, model=model, name=name)
"""


def test_names_no_case_key_can_hold_fail_their_test_naming_them(
    fake_pytester: pytest.Pytester,
) -> None:
    fake_pytester.makepyfile(test_names=NAMES)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1, failed=5)
    out = result.stdout.str()
    assert "Traceback" not in out and "casekey.py" not in out and "TypeError" not in out
    result.stdout.fnmatch_lines(
        [
            "mxperf: test_names.py::test_n[[]slash]: a model label must hold no '/' *: 'a/b'",
            "mxperf: test_names.py::test_n[[]name-slash]: a case name must hold no '/' *: 'c/d'",
            "mxperf: test_names.py::test_n[[]int]: a model label must be a string, got 3 (int)",
            "mxperf: test_names.py::test_n[[]world]: a case name must not look like a world "
            "size (x<N>): 'x2'",
            "mxperf: test_names.py::test_n[[]newline]: a model label must hold no newline*",
        ]
    )
    # The table has one row, whole.
    assert [c["key"] for c in read_report(fake_pytester.path)["cases"]] == [
        "good/inference/float32/bs8/cpu"
    ]


def test_a_marker_model_no_case_key_can_hold_is_a_usage_error(
    fake_pytester: pytest.Pytester,
) -> None:
    fake_pytester.makepyfile(
        "import pytest\n"
        "from pytest_mxperf.testing import FakeModel\n"
        "@pytest.mark.mxperf(model='resnet/50')\n"
        "def test_toy(mxperf):\n"
        "    mxperf.inference(FakeModel(400.0), batch_size=8)\n"
    )
    result = fake_pytester.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*::test_toy: bad @pytest.mark.mxperf: model: a model label must hold no '/'*"]
    )


# Item 8: a bad PYTEST_MXPERF_COMMIT was refused only after measuring (storing the baseline).
@pytest.mark.parametrize("update", [[], ["--mxperf-update"]])
def test_a_commit_variable_that_names_no_commit_is_refused_before_measuring(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    update: list[str],
) -> None:
    fake_pytester.makepyfile(TOY)
    sha = commit("suite")
    monkeypatch.setenv("PYTEST_MXPERF_COMMIT", "release candidate 2")
    result = fake_pytester.runpytest("--mxperf", *update)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*mxperf: PYTEST_MXPERF_COMMIT='release candidate 2' names no commit: it is not a sha*"]
    )
    assert "throughput" not in result.stdout.str()  # nothing measured
    assert stored_files(fake_pytester.path) == []
    # A revision git resolves here, or a sha (one this clone may lack), is taken.
    for name in ("main", sha[:12]):
        monkeypatch.setenv("PYTEST_MXPERF_COMMIT", name)
        fake_pytester.runpytest("--mxperf", *update).assert_outcomes(passed=1)


# Item 8: in a shallow clone, --mxperf-ab HEAD~1 got `git worktree add`'s "invalid reference".
def test_a_revision_a_shallow_clone_lacks_says_how_to_deepen_it(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_pytester.makepyfile(TOY)
    commit("one")
    commit("two")
    shallow = fake_pytester.path / "shallow"
    git(
        fake_pytester.path, "clone", "-q", "--depth", "1", f"file://{fake_pytester.path}", "shallow"
    )
    monkeypatch.chdir(shallow)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-ab", "HEAD~1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--mxperf-ab: revision 'HEAD~1' is not in *shallow, a shallow clone (its history "
            "is cut short); deepen the clone: git fetch --deepen N *fetch-depth: 0)"
        ]
    )
    assert "worktree" not in result.stderr.str()
    git(shallow, "fetch", "-q", "--deepen", "1")
    fake_pytester.runpytest("--mxperf", "--mxperf-ab", "HEAD~1").assert_outcomes(passed=1)
