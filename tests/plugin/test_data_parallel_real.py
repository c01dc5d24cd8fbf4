"""``mxperf.data_parallel`` with real MXNet and launched dist_sync ranks on 127.0.0.1: the
table and JSON carry the aggregate, per-worker and efficiency figures, no rank outlives its
run, and a rank that hangs is ended at the timeout, failing only its case (each run is its own
pytest process, as in CI).

What a stored data-parallel baseline makes of a slower exchange is the plugin's logic, tested
with the fake back end (tests/plugin/test_data_parallel.py: the efficiency that fell and the
kvstore share that grew, named in the message); that an exchange injected by construction
lowers the efficiency and raises the kvstore share of real ranks is
tests/unit/distributed/test_dataparallel_mxnet.py's. Both together here cost two more launches
of four processes and a store that a loaded machine could refuse (docs/measurements.md, "The
plugin's own tests")."""

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
    for name in ("MXPERF_TEST_INJECT_FLOATS", "MXPERF_TEST_DIE_AT", "MXPERF_TEST_HANG_AT"):
        monkeypatch.delenv(name, raising=False)
    result = real_pytester.runpytest_subprocess("--mxperf", "--mxperf-json", "report.json", *SHORT)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
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
