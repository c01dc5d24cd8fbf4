"""Issue 29 (reliability, round 3) through pytester with the fake back end: an errored case fails
its test at the call, usage errors refused before anything is measured, sweeps that fit no batch,
and the other items a new user broke."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_mxperf.testing.repos import cases_by_key, git

#: A test module, written into a test's directory (`tests/data/terminated_worker.py`).
TERMINATED_WORKER_TEST = (
    next(p for p in Path(__file__).resolve().parents if p.name == "tests")
    / "data"
    / "terminated_worker.py"
).read_text()


def _cases(pytester: pytest.Pytester) -> dict[str, Any]:
    return cases_by_key(pytester.path)


# Item 2 and 16: the docs' pattern ``assert result.images_per_sec > 0`` never meets a None figure.
ERRORED = """
import pytest
from pytest_mxperf.testing import FakeModel


def broken():
    raise RuntimeError("engine type bogus is not known")


def test_callable(mxperf):
    r = mxperf.callable(broken, items_per_call=8, model="broken")
    assert r.images_per_sec > 0


def test_nan(mxperf):
    r = mxperf.inference(FakeModel(400.0, nan=True), batch_size=8, model="nan")
    assert r.images_per_sec > 0


def test_dead_rank(mxperf):
    r = mxperf.data_parallel(
        FakeModel(300.0, rank_failure="ps-lite: kv_app.h:624 Check failed"),
        batch_size=8, kvstore="local", contexts=["cpu(0)", "cpu(1)"], model="dead",
    )
    assert r.images_per_sec > 0


def test_after(mxperf):
    r = mxperf.inference(FakeModel(400.0), batch_size=8, model="after")
    assert r.images_per_sec > 0
"""


def test_an_errored_case_fails_at_the_call_with_its_message(
    fake_pytester: pytest.Pytester,
) -> None:
    fake_pytester.makepyfile(ERRORED)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    # The user's assertion after the call never ran: no TypeError hides the cause.
    assert "TypeError" not in out
    assert "images_per_sec > 0" not in out  # pytrace=False: the message, not the frame
    result.stdout.fnmatch_lines(
        [
            "*_ test_callable _*",
            "mxperf: broken/inference/float32/bs8/cpu: RuntimeError: engine type bogus is not known",
            "*_ test_nan _*",
            "mxperf: nan/inference/float32/bs8/cpu: model output contains NaN/inf*",
            "*_ test_dead_rank _*",
            "mxperf: dead/training/float32/bs8/cpu/x2/local: worker 1*SIGKILL*",
            "ps-lite: kv_app.h:624 Check failed",
        ]
    )
    cases = _cases(fake_pytester)
    # Still recorded: the table and the JSON show the errored cases.
    assert cases["broken/inference/float32/bs8/cpu"]["status"] == "error"
    assert cases["nan/inference/float32/bs8/cpu"]["status"] == "nan"
    assert cases["dead/training/float32/bs8/cpu/x2/local"]["status"] == "error"
    assert cases["after/inference/float32/bs8/cpu"]["status"] == "ok"


# Item 14: MXNet aborts the whole session (exit 134, no table, no JSON) on OMP_NUM_THREADS=abc.
def test_an_unreadable_omp_num_threads_is_a_usage_error(
    fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_pytester.makepyfile(
        "from pytest_mxperf.testing import FakeModel\n"
        "def test_toy(mxperf):\n"
        "    mxperf.inference(FakeModel(400.0), batch_size=8, model='toy')\n"
    )
    monkeypatch.setenv("OMP_NUM_THREADS", "abc")
    result = fake_pytester.runpytest("--mxperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*OMP_NUM_THREADS='abc'*whole number*MXNet*aborts*--mxperf-threads*"]
    )
    # --mxperf-threads sets the variable for MXNet: the run goes on.
    result = fake_pytester.runpytest("--mxperf", "--mxperf-threads", "1")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("value", ["inf", "nan", "1e12"])
def test_a_non_finite_or_absurd_pipeline_timeout_is_a_usage_error(
    fake_pytester: pytest.Pytester, value: str
) -> None:
    fake_pytester.makepyfile("def test_nothing():\n    pass\n")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-pipeline-timeout", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*invalid value '{value}'*--mxperf-pipeline-timeout*seconds*"])


# Item 4: under ``pytest -n 2`` the inner pytester runs inherited PYTEST_XDIST_WORKER and took
# themselves for xdist workers (their cases said gw0; tox's py311-xdist was red).
@pytest.fixture
def outer_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a test of this suite run by xdist worker gw7 (set before pytester is made)."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "8")
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "0123456789abcdef")


def test_inner_pytester_runs_are_not_xdist_workers(
    outer_xdist_worker: None, fake_pytester: pytest.Pytester
) -> None:
    fake_pytester.makepyfile(
        "from pytest_mxperf.testing import FakeModel\n"
        "def test_toy(mxperf):\n"
        "    mxperf.inference(FakeModel(400.0), batch_size=8, model='toy')\n"
    )
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1)
    assert _cases(fake_pytester)["toy/inference/float32/bs8/cpu"]["worker"] is None
    sub = fake_pytester.runpytest_subprocess("--mxperf", "--mxperf-json", "report.json")
    sub.assert_outcomes(passed=1)
    assert _cases(fake_pytester)["toy/inference/float32/bs8/cpu"]["worker"] is None


# Item 13: after a history rewrite the stored baseline was silently ignored ("0 case(s)
# resolved", verdict new, no warning).
def test_stored_baselines_none_an_ancestor_are_said(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(
        "from pytest_mxperf.testing import FakeModel\n"
        "def test_toy(mxperf):\n"
        "    mxperf.inference(FakeModel(400.0), batch_size=8, model='toy')\n"
    )
    first = commit("suite")
    fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=1)
    git(fake_pytester.path, "commit", "-q", "--amend", "-m", "suite, reworded")  # a rewrite
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "mxperf: warning: 1 stored baseline(s) for cpu-*, but none is an ancestor of HEAD "
            f"(history rewritten, or stored on another branch): *newest: {first[:10]} (*)*"
        ]
    )
    assert _cases(fake_pytester)["toy/inference/float32/bs8/cpu"]["verdict"]["status"] == "new"


# Item 17: a sweep that fits no batch passed with nothing measured, also under --mxperf-strict.
@pytest.mark.parametrize("strict", [[], ["--mxperf-strict"]])
def test_a_sweep_that_fits_no_batch_fails_naming_the_smallest_batch(
    fake_pytester: pytest.Pytester, strict: list[str]
) -> None:
    fake_pytester.makepyfile(
        """
        from pytest_mxperf.testing import FakeModel

        def test_auto(mxperf):
            mxperf.sweep(FakeModel(500.0, oom_from_batch=1), model="toy", max_batch=64)
            raise AssertionError("not reached: the sweep fails at the call")

        def test_fits(mxperf):
            mxperf.sweep(FakeModel(500.0, oom_from_batch=4), model="fits", max_batch=64)
        """
    )
    result = fake_pytester.runpytest("--mxperf", *strict)
    result.assert_outcomes(passed=0 if strict else 1, failed=1 if not strict else 2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_auto _*",
            "mxperf: sweep toy (inference): nothing measured: float32: no batch size fits "
            "(batch 1: *out of memory*)",
        ]
    )
    assert "not reached" not in result.stdout.str()


def test_the_suites_pipeline_cases_skip_without_pillow_naming_the_install(
    pytester: pytest.Pytester,
) -> None:
    suite = Path(__file__).resolve().parents[1] / "perf" / "test_pipelines.py"
    # Another basename than tests/perf's module, which a whole-suite run has imported already.
    pytester.makepyfile(test_pipelines_without_pillow=suite.read_text(encoding="utf-8"))
    pytester.makeconftest("import sys\nsys.modules['PIL'] = None  # no pillow here\n")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*pillow is not installed*pip install pillow*"])


# Item 19: a data-parallel factory string that does not import was found only after the ranks
# were launched (each rank's traceback).
@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            "no_such_module_here:toy",
            "cannot import 'no_such_module_here' for "
            "'no_such_module_here:toy': No module named 'no_such_module_here'",
        ),
        ("test_factory:missing", "'test_factory' has no attribute 'missing'"),
        ("test_factory:NOT_CALLABLE", "'test_factory:NOT_CALLABLE' is not callable (a str)*"),
        ("test_factory", "expected 'package.module:function', got 'test_factory'"),
    ],
)
def test_a_factory_that_does_not_import_is_refused_before_launching(
    fake_pytester: pytest.Pytester, factory: str, message: str
) -> None:
    fake_pytester.makeconftest(
        """
        import pytest
        from pytest_mxperf.testing import FakeBackend

        class NeverLaunch(FakeBackend):
            def data_parallel(self, model, spec):
                raise AssertionError("ranks launched")

        @pytest.fixture(scope="session")
        def mxperf_backend():
            return NeverLaunch()
        """
    )
    fake_pytester.makepyfile(
        test_factory=f"""
        NOT_CALLABLE = "a string"

        def test_dist(mxperf):
            mxperf.data_parallel({factory!r}, batch_size=8, workers=2, model="toy")
        """
    )
    result = fake_pytester.runpytest("--mxperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"mxperf: data_parallel: {message}"])
    out = result.stdout.str()
    assert "ranks launched" not in out
    assert "During handling" not in out and "Traceback" not in out


# Item 19: a labels= mismatch printed ~126 traceback lines around its clear message.
def test_a_loss_that_does_not_fit_is_one_message(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makeconftest(
        """
        import pytest
        from pytest_mxperf.backend.tasks import LossShapeError
        from pytest_mxperf.testing import FakeBackend

        class LabelsMismatch(FakeBackend):
            def prepare(self, model, spec):
                raise LossShapeError(
                    "the loss does not fit the model: outputs (8, 10); labels (3, 7) "
                    "(from labels=)"
                )

        @pytest.fixture(scope="session")
        def mxperf_backend():
            return LabelsMismatch()
        """
    )
    fake_pytester.makepyfile(
        test_labels="""
        from pytest_mxperf.testing import FakeModel

        def test_mismatch(mxperf):
            mxperf.training(FakeModel(400.0), batch_size=8, model="lab", labels=[1])
        """
    )
    result = fake_pytester.runpytest("--mxperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_mismatch _*",
            "mxperf: lab/training/float32/bs8/cpu: LossShapeError: the loss does not fit the "
            "model: outputs "
            "(8, 10); labels (3, 7) (from labels=)",
        ]
    )
    out = result.stdout.str()
    assert "def prepare" not in out and "runner.py" not in out  # no traceback around it
    assert "During handling" not in out and "direct cause" not in out  # nor a chain


# Item 19: a pipeline timeout on the first batch was a raw traceback (the batch fetched to learn
# the batch size or shape), where a later one is a clean ERROR row.
SLOW_FIRST = """
import threading
from pytest_mxperf.testing import FakeArray, FakeModel

RELEASE = threading.Event()  # the stuck fetch ends with the test


class SlowFirst:
    # Its first batch takes longer than the timeout; then 10 ms a batch (fake clock).

    def __init__(self, backend, batch_size=None):
        self.backend = backend
        if batch_size is not None:
            self.batch_size = batch_size  # as a DataIter declares it

    def __iter__(self):
        RELEASE.wait(10)
        for _ in range(4):
            self.backend.now += 0.01
            yield FakeArray((8, 4))


def test_e2e(mxperf, mxperf_backend):
    try:
        mxperf.training(FakeModel(300.0), data=SlowFirst(mxperf_backend, 8), model="e2e")
    finally:
        RELEASE.set()


def test_pipeline(mxperf, mxperf_backend):
    RELEASE.clear()
    try:
        mxperf.pipeline(SlowFirst(mxperf_backend), model="pipe")
    finally:
        RELEASE.set()
"""


def test_a_timeout_on_the_first_batch_is_a_clean_failure(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(test_slow=SLOW_FIRST)
    result = fake_pytester.runpytest(
        "--mxperf", "--mxperf-pipeline-timeout", "0.2", "--mxperf-json", "report.json"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_e2e _*",
            "mxperf: e2e/training/float32/bs8/cpu/e2e: PipelineTimeout: the source delivered no "
            "batch within 0.2 s (--mxperf-pipeline-timeout)*",
            "*_ test_pipeline _*",
            "mxperf: pipeline pipe: PipelineTimeout: the source delivered no batch within 0.2 s "
            "(--mxperf-pipeline-timeout), fetching its first batch to learn the batch size; "
            "pass batch_size=*",
        ]
    )
    out = result.stdout.str()
    assert "Traceback" not in out and "source.py" not in out
    # The case whose batch size is known is an ERROR row, as a later timeout makes it.
    case = _cases(fake_pytester)["e2e/training/float32/bs8/cpu/e2e"]
    assert case["status"] == "error" and "PipelineTimeout" in case["error"]


def test_a_runs_terminated_loader_workers_leave_no_temporary_directory(
    fake_pytester: pytest.Pytester,
) -> None:
    # A Gluon DataLoader's workers, ended by their pool's terminate(), each left a /tmp/pymp-*
    # behind (4 per run of the repository's pipeline cases): they share the run's, which the
    # run removes as it exits.
    fake_pytester.makepyfile(TERMINATED_WORKER_TEST)
    root = Path(os.environ["TMPDIR"])
    result = fake_pytester.runpytest_subprocess("--mxperf", "-s")
    result.assert_outcomes(passed=1)
    (used,) = re.findall(r"worker (\S+)", result.stdout.str())
    assert Path(used).parent == root and Path(used).name.startswith("pymp-")
    assert not Path(used).exists() and not list(root.glob("pymp-*"))
