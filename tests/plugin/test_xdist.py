"""pytest-xdist: same cases as serial, one table, one JSON, one write, no overlapping CPU work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_mxperf.testing.repos import REAL_SUITE, stored_keys

pytest.importorskip("xdist")

FAKE_SUITE = """
import os, time
import pytest
from pytest_mxperf.testing import FakeModel

@pytest.mark.parametrize("model", ["a", "b", "c", "d"])
def test_bench(mxperf, model):
    mxperf.inference(FakeModel(images_per_sec=100.0), batch_size=4, model=model)

@pytest.mark.parametrize("i", range(4))
def test_plain(i):
    time.sleep(0.05)
"""


def cases(path: Path) -> dict[str, Any]:
    return {c["key"]: c for c in json.loads(path.read_text())["cases"]}


def assert_no_overlap(found: dict[str, Any]) -> None:
    windows = sorted(tuple(c["window"]) for c in found.values() if c["device_kind"] == "cpu")
    for (_, end), (start, _) in zip(windows, windows[1:]):
        assert start >= end, f"CPU benchmark windows overlap: {windows}"


def test_xdist_same_cases_one_table_one_json(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(FAKE_SUITE)
    serial = fake_pytester.runpytest("--mxperf", "--mxperf-json", "serial.json")
    serial.assert_outcomes(passed=8)
    result = fake_pytester.runpytest("-n", "2", "--mxperf", "--mxperf-json", "par.json")
    result.assert_outcomes(passed=8)
    out = result.stdout.str()
    assert out.count("mxperf: throughput") == 1
    assert out.count("mxperf verdicts:") == 1
    par = cases(fake_pytester.path / "par.json")
    assert set(par) == set(cases(fake_pytester.path / "serial.json"))
    assert {c["nodeid"].split("::")[0] for c in par.values()} == {
        "test_xdist_same_cases_one_table_one_json.py"
    }
    assert {c["worker"] for c in par.values()} <= {"gw0", "gw1"}
    assert {c["worker"] for c in cases(fake_pytester.path / "serial.json").values()} == {None}
    result.stdout.fnmatch_lines(["*xdist: CPU benchmarks take turns*"])


def test_xdist_update_writes_once(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    fake_pytester.makepyfile(FAKE_SUITE)
    commit("suite")
    result = fake_pytester.runpytest("-n", "3", "--mxperf", "--mxperf-update")
    result.assert_outcomes(passed=8)
    written = [line for line in result.stdout.lines if "baseline written" in line]
    assert len(written) == 1 and "(4 case(s))" in written[0]
    files = list((fake_pytester.path / "baselines").rglob("*.json"))
    assert len(files) == 1
    assert len(json.loads(files[0].read_text())["cases"]) == 4
    assert not list((fake_pytester.path / "baselines").rglob("*.tmp"))
    again = fake_pytester.runpytest("-n", "2", "--mxperf")
    again.assert_outcomes(passed=8)
    again.stdout.fnmatch_lines(["*mxperf verdicts: 4 pass*"])


def test_xdist_workers_get_run_facts_from_controller(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        import os
        import pytest
        from pytest_mxperf.plugin import STATE_KEY

        @pytest.mark.parametrize("i", range(4))
        def test_run(request, i):
            state = request.config.stash[STATE_KEY]
            assert state.is_worker
            worker = os.environ["PYTEST_XDIST_WORKER"]
            with open(f"facts-{i}.txt", "w") as fh:
                fh.write(f"{worker} {state.run.run_id} {state.run.commit.sha}")
        """
    )
    result = fake_pytester.runpytest_subprocess("-n", "2", "--mxperf")
    result.assert_outcomes(passed=4)
    facts = [(fake_pytester.path / f"facts-{i}.txt").read_text().split() for i in range(4)]
    assert {worker for worker, _, _ in facts} == {"gw0", "gw1"}
    # Both workers carry the controller's facts: one run id, made once; no commit here.
    assert len({run_id for _, run_id, _ in facts}) == 1
    assert {sha for _, _, sha in facts} == {"None"}


def test_duplicate_keys_across_workers_fail_the_run(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        import pytest
        from pytest_mxperf.testing import FakeModel
        @pytest.mark.parametrize("i", range(2))
        def test_same(mxperf, i):
            mxperf.inference(FakeModel(10.0), batch_size=1, model="same")
        """
    )
    result = fake_pytester.runpytest("-n", "2", "--mxperf", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*measured twice*"])


def test_crashing_worker_loses_only_its_case(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(
        """
        import os
        import pytest
        from pytest_mxperf.testing import FakeModel

        @pytest.mark.parametrize("model", ["a", "b", "crash", "c"])
        def test_bench(mxperf, model):
            mxperf.inference(FakeModel(images_per_sec=100.0), batch_size=4, model=model)
            if model == "crash":
                os._exit(3)
        """
    )
    result = fake_pytester.runpytest_subprocess(
        "-n", "2", "--mxperf", "--mxperf-json", "r.json", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*mxperf: throughput*", "*crashed*"])
    found = cases(fake_pytester.path / "r.json")
    assert set(found) == {f"{m}/inference/float32/bs4/cpu" for m in "abc"}
    result.assert_outcomes(passed=3, failed=1)


def test_real_model_under_xdist_matches_serial(
    real_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    """Tiny real MXNet models: -n 2 gives the cases of a serial run, and its numbers are within
    the noise of the serial run (judged by the plugin against the serial run as baseline)."""
    pytest.importorskip("mxnet")
    real_pytester.makepyfile(
        test_real=REAL_SUITE,
        test_other="import time\nimport pytest\n@pytest.mark.parametrize('i', range(3))\ndef test_plain(i):\n    time.sleep(0.2)\n",
    )
    commit("suite")
    fast = ["--mxperf-min-time", "0.3", "--mxperf-max-time", "1", "--mxperf-warmup-time", "1"]
    # One attempt per case (an update otherwise stores the best of 1 + --mxperf-confirm):
    # the figures only need to be this machine's, for the -n 2 run to be judged against.
    serial = real_pytester.runpytest_subprocess(
        "--mxperf", "--mxperf-update", "--mxperf-confirm", "0", "--mxperf-json", "s.json", *fast
    )
    serial.assert_outcomes(passed=5)
    # Judged against the stored serial figures only (no pair): this test is about xdist.
    par = real_pytester.runpytest_subprocess(
        "-n", "2", "--mxperf", "--mxperf-json", "p.json", "--mxperf-arbitrate", "off", *fast
    )
    par.assert_outcomes(passed=5)
    s, p = cases(real_pytester.path / "s.json"), cases(real_pytester.path / "p.json")
    assert (
        set(s)
        == set(p)
        == {f"resnet18_v1-{w}/inference/float32/bs10/cpu" for w in ("target", "steady")}
    )
    # The serial run stores a case only when its blocks are steady enough (a loaded machine,
    # e.g. this suite itself under -n 2, may make one too noisy): a case not stored is new,
    # and the numbers of the cases that were stored are judged against them.
    stored = stored_keys(real_pytester.path)
    for key, case in p.items():
        allowed = {"pass", "improved", "unstable"} if key in stored else {"new"}
        assert case["verdict"]["status"] in allowed, (key, case["verdict"])
    assert_no_overlap(p)
    assert par.stdout.str().count("mxperf: throughput") == 1


FAKE_SMI = """#!/bin/sh
echo "0, GPU-aaaa1111-0000-0000-0000-000000000000, Tesla V100-SXM2-16GB"
echo "1, GPU-bbbb2222-0000-0000-0000-000000000000, Tesla V100-SXM2-16GB"
echo "2, GPU-cccc3333-0000-0000-0000-000000000000, Tesla T4"
"""


def test_gpu_mapping_per_worker_with_fake_devices(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake nvidia-smi on PATH and CUDA_VISIBLE_DEVICES=2,0: two visible GPUs, in that order.
    Worker gwN measures on visible GPU N mod 2 and keys its cases by that GPU's model."""
    bin_dir = pytester.mkdir("fakebin")
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    pytester.makeconftest(
        "import pytest\nfrom pytest_mxperf.testing import FakeBackend\n"
        "@pytest.fixture(scope='session')\ndef mxperf_backend():\n    return FakeBackend(gpus=2)\n"
    )
    pytester.makepyfile(
        """
        import os
        import pytest
        from pytest_mxperf.testing import FakeModel

        @pytest.mark.parametrize("m", ["a", "b", "c", "d"])
        def test_gpu(mxperf, mx_ctx, m):
            r = mxperf.inference(FakeModel(10.0), batch_size=1, ctx=mx_ctx, model=m)
            worker = int(os.environ["PYTEST_XDIST_WORKER"][2:])
            assert r.device == f"gpu({worker % 2})"
            expected = ["gpu-tesla-t4-x1", "gpu-tesla-v100-sxm2-16gb-x1"][worker % 2]
            assert r.hardware == expected
        """
    )
    result = pytester.runpytest("-n", "3", "--mxperf", "--mxperf-ctx", "gpu")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*mxperf: hardware cpu-*, gpu 0: Tesla T4 (nvidia-smi index 2), "
            "gpu 1: Tesla V100-SXM2-16GB (nvidia-smi index 0)*",
            "*mxperf: xdist GPU mapping gw0 -> GPU 0, gw1 -> GPU 1, gw2 -> GPU 0*",
        ]
    )
