"""Strong scaling through pytester with the fake back end: the marker says the kind, the call
inherits it, the case key, the table and the JSON say it, and a mismatch or a total that does
not divide over the devices is a clear error."""

from __future__ import annotations

import pytest

from pytest_mxperf.testing.repos import cases_by_key

SUITE = """
import pytest
from pytest_mxperf.testing import FakeModel

CPUS = ["cpu(0)", "cpu(1)"]


@pytest.mark.mxperf(efficiency={2: 0.5}, scaling="strong")
def test_strong(mxperf):
    r = mxperf.data_parallel(FakeModel(300.0, scaling=0.8), batch_size=32, kvstore="local",
                             contexts=CPUS, model="toy")
    assert r.scaling.kind == "strong"


@pytest.mark.mxperf(scaling="strong")
def test_mismatch(mxperf):
    mxperf.data_parallel(FakeModel(300.0), batch_size=32, kvstore="local", contexts=CPUS,
                         model="toy", scaling="weak")


def test_uneven(mxperf):
    mxperf.data_parallel(FakeModel(300.0), batch_size=33, kvstore="local", contexts=CPUS,
                         model="odd", scaling="strong")
"""


def test_strong_case_key_table_json_and_errors(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(test_suite=SUITE)
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*data_parallel(scaling='weak') but the test's mxperf marker says scaling='strong'*",
            "*strong scaling splits the total batch_size=33 over 2 devices, but 33 is not a "
            "multiple of 2 (33 / 2 = 16.5)*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*mxperf: data-parallel scaling (strong: total batch split)*",
            # 80 columns: bs/dev is dropped (the JSON has it)
            "case*devices*scaling*img/s*efficiency*",
            "toy ?local-strong?*2*strong*160.0*80.0%*",
        ]
    )
    (case,) = cases_by_key(fake_pytester.path).values()
    assert case["key"] == "toy/training/float32/bs32/cpu/x2/local-strong"
    s = case["scaling"]
    assert (s["kind"], s["total_batch"], s["batch_per_device"]) == ("strong", 32, 16)
    assert s["single_batch_per_device"] == 32
    assert s["efficiency"] == pytest.approx(0.8)
