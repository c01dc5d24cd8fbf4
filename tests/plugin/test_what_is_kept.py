"""What committed baselines and the JSON report keep (issue #49): MXNet's documented settings,
no secrets, no absolute paths."""

from __future__ import annotations

import json

import pytest

from pytest_mxperf.testing.repos import stored_files


def test_baselines_and_report_keep_no_secret_and_no_absolute_path(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MXNET_SECRET_TOKEN", "ghp_notarealtoken0123456789")
    monkeypatch.setenv("MKL_LICENSE_KEY", "mkl-secret-42")
    monkeypatch.setenv("MXNET_EXEC_BULK_EXEC_TRAIN", "0")
    result = suite.runpytest("--mxperf", "--mxperf-update", "--mxperf-json=report.json")
    result.assert_outcomes(passed=2)
    for path in stored_files(suite.path):
        text = path.read_text()
        assert "ghp_" not in text and "mkl-secret" not in text
        for case in json.loads(text)["cases"].values():
            env = case["environment"]
            assert "MXNET_SECRET_TOKEN" not in env
            assert env["MKL_LICENSE_KEY"] == "<redacted>"
            assert env["MXNET_EXEC_BULK_EXEC_TRAIN"] == "0"
    report = (suite.path / "report.json").read_text()
    assert "ghp_" not in report and str(suite.path) not in report
    run = json.loads(report)["run"]
    assert run["commit"]["repo_root"] == "."
    assert run["baseline_root"] == "baselines"
