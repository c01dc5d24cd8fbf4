"""``mxperf.data_parallel`` with real MXNet and launched dist_sync ranks on 127.0.0.1: the
table and JSON carry the aggregate, per-worker and efficiency figures, no rank outlives its
run, and an exchange injected by construction is reported as a scaling regression against the
stored baseline, naming the kvstore share (each run is its own pytest process, as in CI)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from statistics import median

import pytest

pytest.importorskip("mxnet")

MODELS = Path(__file__).parent.parent / "unit" / "mxperf_dp_models.py"
KEY = "mlp/training/float32/bs16/cpu/x2/dist_sync"
SUITE = """
def test_scaling(mxperf):
    mxperf.data_parallel(
        "mxperf_dp_models:dense_net",
        batch_size=16,
        input_shape=(3, 32, 32),
        kvstore="dist_sync",
        workers=2,
        servers=1,
        model="mlp",
        step_hook="mxperf_dp_models:hooks",
    )
"""
SHORT = ("--mxperf-min-time", "0.4", "--mxperf-max-time", "1.0", "--mxperf-warmup-time", "1.0")
#: The store measures as the regression run does (`SHORT`): with its ~5 blocks, a few slowed by
#: the other xdist worker can leave the spread (IQR) beyond what may be stored (25%; 27% in one
#: of eight `pytest -n 2` runs, 38% once even with blocks over 1-2.5 s, which cost ~10 s a run
#: more). Then nothing is stored and the store is run again, at most this many times in all
#: (what the plugin does with a spread that wide is its own tests' business, not this one's).
STORE_RUNS = 4
NOT_STORED = "mxperf: not stored as baseline: "


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment carries ``MXPERF_TEST_TAG=tag`` (ranks inherit it)."""
    needle = f"MXPERF_TEST_TAG={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_dist_sync_through_the_fixture(
    real_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(MODELS, real_pytester.path / MODELS.name)
    real_pytester.makepyfile(test_dp=SUITE)
    tag = uuid.uuid4().hex
    monkeypatch.setenv("MXPERF_TEST_TAG", tag)
    monkeypatch.setenv("PYTEST_MXPERF_COMMIT", "b" * 40)
    for name in ("MXPERF_TEST_INJECT_FLOATS", "MXPERF_TEST_DIE_AT", "MXPERF_TEST_HANG_AT"):
        monkeypatch.delenv(name, raising=False)

    spreads = []
    for _ in range(STORE_RUNS):
        stored = real_pytester.runpytest_subprocess(
            "--mxperf", "--mxperf-update", "--mxperf-json", "report.json", *SHORT
        )
        stored.assert_outcomes(passed=1)
        spreads = [line for line in stored.outlines if line.startswith(NOT_STORED)]
        if not spreads:
            break
    assert not spreads, f"no baseline stored in {STORE_RUNS} runs: {spreads}"
    stored.stdout.fnmatch_lines(
        ["*mxperf: data-parallel scaling*", "case*devices*img/s*efficiency*", "mlp ?dist_sync?*2*"]
    )
    assert tagged_pids(tag) == []
    data = json.loads((real_pytester.path / "report.json").read_text())
    (case,) = data["cases"]
    assert case["key"] == KEY and case["status"] == "ok"
    s = case["scaling"]
    workers = s["per_worker_images_per_sec"]
    assert len(workers) == 2 and all(rate > 0 for rate in workers)
    aggregate = case["measurement"]["block_images_per_sec"]
    # The case's img/s is the aggregate of both workers; efficiency = it / (2 x img/s(1)).
    assert s["efficiency"] == pytest.approx(median(aggregate) / (2 * s["single_images_per_sec"]))
    assert 0 <= s["comm_share"] <= 1 and s["threads_per_worker"] >= 1
    assert case["threads"]["omp_threads"] == s["threads_per_worker"]

    # 2M floats per worker and step through the one server: the exchange dominates the step
    # by construction, so the efficiency falls and the kvstore share rises.
    monkeypatch.setenv("MXPERF_TEST_INJECT_FLOATS", str(2_000_000))
    for _ in range(STORE_RUNS):
        slow = real_pytester.runpytest_subprocess(
            "--mxperf", "--mxperf-confirm", "0", "--mxperf-json", "report.json", *SHORT
        )
        (case,) = json.loads((real_pytester.path / "report.json").read_text())["cases"]
        # Beside the other xdist worker one run's blocks spread 48% (IQR / median): then no
        # drop, even -89%, is beyond twice the spread, and the case is rightly unstable.
        if not (case["verdict"]["status"] == "unstable" and case["measurement"]["rel_iqr"] > 0.25):
            break
    slow.assert_outcomes(failed=1)
    # Which gate leads (the efficiency, or the aggregate when the efficiency of this tiny,
    # noisy model is too noisy to judge on its own) depends on the noise, and so does whether
    # the efficiency fell below the stored one (img/s(1) is measured beside the other xdist
    # worker too: in one CI run the injected exchange measured 41.7%, no lower than what the
    # store run had kept); the kvstore line says the exchange grew either way.
    slow.stdout.fnmatch_lines(
        [
            f"*{KEY}: *baseline*",
            "*kvstore (dist_sync) share of a step: *% -> *%: *communication grew*",
        ]
    )
    (case,) = json.loads((real_pytester.path / "report.json").read_text())["cases"]
    assert case["verdict"]["status"] == "regressed"
    assert case["scaling"]["comm_share"] > s["comm_share"]
    assert tagged_pids(tag) == []


HANG_SUITE = """
import mxperf_dp_models


def test_hangs(mxperf):
    mxperf.data_parallel(
        "mxperf_dp_models:dense_net", batch_size=16, input_shape=(3, 32, 32),
        kvstore="dist_sync", workers=2, model="mlp", step_hook="mxperf_dp_models:hooks",
    )


def test_after(mxperf):
    mxperf.training(mxperf_dp_models.dense_net(), batch_size=16, input_shape=(3, 32, 32),
                    model="mlp")
"""


def test_dist_timeout_ends_every_rank_and_fails_only_that_case(
    real_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(MODELS, real_pytester.path / MODELS.name)
    real_pytester.makepyfile(test_dp=HANG_SUITE)
    tag = uuid.uuid4().hex
    monkeypatch.setenv("MXPERF_TEST_TAG", tag)
    monkeypatch.setenv("MXPERF_TEST_HANG_AT", "0:1")  # worker 0 sleeps from its first step
    for name in ("MXPERF_TEST_INJECT_FLOATS", "MXPERF_TEST_DIE_AT"):
        monkeypatch.delenv(name, raising=False)
    result = real_pytester.runpytest_subprocess(
        "--mxperf",
        "--mxperf-dist-timeout",  # the hang is certain: the ranks need not have started
        "2",
        "--mxperf-json",
        "report.json",
        *SHORT,
        timeout=300,  # a timeout not passed on to the launcher would hang for its default
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*dist_sync with 1 workers did not finish within 2 s*"])
    assert tagged_pids(tag) == []
    data = json.loads((real_pytester.path / "report.json").read_text())
    status = {c["key"]: c["status"] for c in data["cases"]}
    assert status == {KEY: "error", "mlp/training/float32/bs16/cpu": "ok"}
