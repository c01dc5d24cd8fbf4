"""examples/github-actions.yml: valid YAML with the jobs and steps the README promises, and a
`mxperf report` line that really runs."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_mxperf import cli

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / "examples" / "github-actions.yml"


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def steps(workflow: dict[Any, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in workflow["jobs"]["benchmarks"]["steps"]}


def test_triggers_and_runner(workflow: dict[Any, Any]) -> None:
    # YAML 1.1 reads a bare `on` key as True; GitHub reads it as "on".
    triggers = workflow.get("on", workflow.get(True))
    assert isinstance(triggers, dict) and set(triggers) == {"push", "pull_request"}
    assert set(workflow["jobs"]) == {"benchmarks"}
    job = workflow["jobs"]["benchmarks"]
    assert job["runs-on"].startswith("ubuntu-")
    assert workflow["permissions"] == {"contents": "read"}


def test_history_and_cached_venv(workflow: dict[Any, Any]) -> None:
    s = steps(workflow)
    checkout = s["Check out with history"]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["fetch-depth"] == 0
    cache = s["Cache the virtual environment"]
    assert cache["uses"].startswith("actions/cache@")
    assert cache["with"]["path"] == ".venv"
    assert "hashFiles('pyproject.toml')" in cache["with"]["key"]
    assert '".[cpu,report]"' in s["Install"]["run"]


def test_main_job_and_paired_pull_requests(workflow: dict[Any, Any]) -> None:
    s = steps(workflow)
    push = s["Benchmarks against the stored baselines"]
    assert push["if"] == "github.event_name != 'pull_request'"
    assert push["run"].startswith("pytest --mxperf tests/perf ")
    assert "--mxperf-ab" not in push["run"]
    pr = s["Benchmarks paired with the base branch"]
    assert pr["if"] == "github.event_name == 'pull_request'"
    assert pr["env"]["BASE_REF"] == "${{ github.base_ref }}"
    args = shlex.split(pr["run"])
    assert args[:3] == ["pytest", "--mxperf", "tests/perf"]
    assert args[args.index("--mxperf-ab") + 1] == "origin/$BASE_REF"
    for run in (push["run"], pr["run"]):
        argv = shlex.split(run)
        assert argv[argv.index("--mxperf-json") + 1] == "mxperf.json"
        assert argv[argv.index("--mxperf-markdown") + 1] == "mxperf-summary.md"


def test_summary_report_and_artifacts(workflow: dict[Any, Any]) -> None:
    s = steps(workflow)
    # --mxperf-markdown appends to the job summary itself: no step may append it again.
    assert not any("GITHUB_STEP_SUMMARY" in str(step.get("run", "")) for step in s.values())
    upload = s["Upload results and report"]
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert upload["if"] == "always()"
    assert set(upload["with"]["path"].split()) == {
        "mxperf.json",
        "mxperf-summary.md",
        "mxperf-report.html",
    }
    names = list(s)
    assert names.index("History page") < names.index("Upload results and report")


def test_the_report_line_runs(
    workflow: dict[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = shlex.split(steps(workflow)["History page"]["run"])
    assert argv[0] == "mxperf"
    out = tmp_path / "mxperf-report.html"
    argv[argv.index("--out") + 1] = str(out)
    monkeypatch.chdir(ROOT)  # the workflow runs at the repository root
    assert cli.main(argv[1:]) == 0
    assert out.stat().st_size > 1_000_000  # plotly's JavaScript is inside
