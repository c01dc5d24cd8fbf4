"""examples/user-project's workflows as files (what they must and must not do), and the small
expression evaluator the harness runs them with (`pytest_mxperf.testing.workflows`). Running
them is tests/plugin/test_workflow_recipe.py."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf.testing import workflows
from pytest_mxperf.testing.workflow_actions import read_outputs
from pytest_mxperf.testing.workflow_steps import Event, Runner, run_script
from pytest_mxperf.testing.workflows import Evaluator, Status, WorkflowError

PROJECT = Path(__file__).resolve().parents[3] / "examples" / "user-project"
FLOWS = PROJECT / ".github" / "workflows"

#: Versions checked on the actions' release pages and by actionlint (node24 runtimes).
VERSIONS = {
    "actions/checkout": "v5",
    "actions/setup-python": "v6",
    "actions/cache": "v5",
    "actions/upload-artifact": "v6",
    "actions/download-artifact": "v7",
}


def flow(name: str) -> dict[str, Any]:
    return workflows.load(FLOWS / name)


def steps(data: dict[str, Any], job: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in data["jobs"][job]["steps"]}


def test_the_plugin_is_pinned_and_never_installed_from_the_checkout() -> None:
    lines = (PROJECT / "requirements-perf.txt").read_text().splitlines()
    assert "pytest-mxperf[cpu]==0.2.0" in lines
    assert any("pytest-mxperf[cpu] @ git+https://" in line for line in lines if "#" in line)
    for path in FLOWS.glob("*.yml"):
        text = path.read_text()
        assert "pip install -e" not in text and "-r requirements-perf.txt" in text


def test_actions_are_the_checked_versions() -> None:
    for path in FLOWS.glob("*.yml"):
        for action, version in re.findall(r"uses: ([\w/-]+)@(\S+)", path.read_text()):
            assert VERSIONS[action] == version, (path.name, action)


def test_the_pr_job_holds_no_token_and_the_cache_survives_a_python_update() -> None:
    pr = flow("mxperf-pr.yml")
    assert pr["permissions"] == {"contents": "read"}
    text = (FLOWS / "mxperf-pr.yml").read_text()
    assert "github.token" not in text and "secrets." not in text
    s = steps(pr, "benchmarks")
    key = s["Cache the virtual environment"]["with"]["key"]
    assert "steps.python.outputs.python-version" in key
    assert "hashFiles('requirements-perf.txt')" in key
    assert 'if ! .venv/bin/python -c "import sys"' in s["Install the plugin"]["run"]
    assert s["Upload the PR comment"]["if"] == "always()"
    # No job asks for more, and the checkout keeps no credentials in the PR's workspace.
    assert all("permissions" not in job for job in pr["jobs"].values())
    assert s["Check out with history"]["with"]["persist-credentials"] is False


def test_only_the_main_job_may_push_its_history() -> None:
    main = flow("mxperf-main.yml")
    assert main["permissions"] == {"contents": "read"}
    job = main["jobs"]["benchmarks"]
    assert job["permissions"] == {"contents": "write", "actions": "read", "pull-requests": "read"}
    s = steps(main, "benchmarks")
    # The checkout keeps no token; only the push step has it, in its environment; the lookup of
    # the merged PR's run and the download of its report read with it, and run no benchmark.
    assert s["Check out with history"]["with"] == {"fetch-depth": 0, "persist-credentials": False}
    with_token = [name for name, step in s.items() if "secrets." in str(step)]
    assert with_token == ["Add the pairs to the history"]
    readers = [name for name, step in s.items() if "github.token" in str(step)]
    assert readers == ["The pull request this push merged", "Download its pair"]
    assert all("pytest" not in str(s[name]) for name in readers)
    lookup = s["The pull request this push merged"]["run"]
    assert "mxperf history pr-run --workflow mxperf-pr.yml" in lookup
    download = s["Download its pair"]
    assert download["continue-on-error"] is True  # an expired artifact: the job pairs itself
    assert download["with"]["run-id"] == "${{ steps.pr.outputs.run }}"
    adopt = s["Adopt it when it measured this commit"]
    assert adopt["if"] == "steps.pr_report.outcome == 'success'"
    assert "mxperf history adopt --no-fetch --check mxperf-pr/mxperf.json" in adopt["run"]
    assert (
        "steps.adopt.outputs.report == ''"
        in s["Benchmarks paired with the last commit in the history"]["if"]
    )
    assert "mxperf history base --no-fetch" in s["The last commit in the history"]["run"]
    pair = s["Benchmarks paired with the last commit in the history"]["run"]
    anchor = s["Benchmarks paired with the anchor"]["run"]
    assert '--mxperf-ab "$REV"' in pair and '--mxperf-ab "$ANCHOR"' in anchor
    # The history's pairs only measure the ratio: no second run, no profile round.
    for run in (pair, anchor):
        assert "--mxperf-pair-confirm off" in run and "--mxperf-pair-profile off" in run
    assert '"$status" -gt 1' in anchor  # a crash of the anchor pair fails the step
    assert "--mxperf-rounds 5" in anchor and "--mxperf-rounds" not in pair  # anchors: precision
    # A regressed pair (the step failed) is added too, when its report exists; the anchor's
    # report only when its step passed; one step fetches and pushes, with the token.
    add = s["Add the pairs to the history"]
    assert "!cancelled()" in add["if"] and "hashFiles('mxperf.json') != ''" in add["if"]
    assert add["env"]["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
    assert add["env"]["ANCHOR_REPORT"] == "${{ steps.anchor_pair.outputs.report }}"
    assert "mxperf history add mxperf.json\n" in add["run"]
    assert 'mxperf history add "$ANCHOR_REPORT"' in add["run"]
    assert 'GIT_CONFIG_KEY_0="http.$GITHUB_SERVER_URL/.extraheader"' in add["run"]
    every = s["The anchor this job also pairs with"]["run"]
    assert 'rev=$(mxperf history anchor --no-fetch --every "$MXPERF_ANCHOR_EVERY")\n' in every
    assert main["env"]["MXPERF_ANCHOR_EVERY"] == "${{ vars.MXPERF_ANCHOR_EVERY || '5' }}"
    assert main["concurrency"] == {
        "group": "mxperf-main",
        "cancel-in-progress": False,
        "queue": "max",
    }
    uploaded = s["Upload the results"]["with"]["path"].split()
    assert uploaded == [
        "mxperf.json",
        "mxperf-anchor.json",
        "mxperf-summary.md",
        "mxperf-history.html",
        "mxperf-pr/mxperf.json",
    ]
    page = s["The history page"]["run"]
    assert "--history git:mxperf-history --history-no-fetch --out mxperf-history.html" in page


@pytest.mark.parametrize(
    ("pytest_exit", "report", "passes"),
    [
        (0, True, True),
        (1, True, True),  # a regression (or a failed case) in the anchor pair gates nothing
        (1, False, False),  # no report: the run did not reach its end
        (2, True, False),  # interrupted
        (3, True, False),  # internal error
        (5, False, False),  # nothing collected
    ],
)
def test_the_anchor_step_ignores_its_verdict_never_a_crash(
    tmp_path: Path, pytest_exit: int, report: bool, passes: bool
) -> None:
    """The anchor step's script, with a stand-in for pytest that exits as given: it passes its
    report on to the push step (an output) only when the pair ran to its end."""
    run = steps(flow("mxperf-main.yml"), "benchmarks")["Benchmarks paired with the anchor"]["run"]
    tools = tmp_path / "bin"
    tools.mkdir()
    made = "touch mxperf-anchor.json" if report else ":"
    (tools / "pytest").write_text(f"#!/bin/sh\n{made}\nexit {pytest_exit}\n")
    (tools / "pytest").chmod(0o755)
    (tmp_path / "step.sh").write_text(run)
    output = tmp_path / "output.txt"
    env = {"PATH": f"{tools}:/usr/bin:/bin", "ANCHOR": "a" * 40, "GITHUB_OUTPUT": str(output)}
    status, out = run_script(tmp_path / "step.sh", tmp_path, env, timeout=30.0)
    assert (status == 0) == passes, out
    told = read_outputs(output) if output.exists() else {}
    assert told == ({"report": "mxperf-anchor.json"} if passes else {})


@pytest.mark.parametrize(("anchor", "add_exit"), [("", 0), ("mxperf-anchor.json", 0), ("x", 2)])
def test_the_push_step_adds_the_chain_first_with_the_token_in_its_environment(
    tmp_path: Path, anchor: str, add_exit: int
) -> None:
    """The push step's script, with a stand-in for mxperf that records what git would send:
    the token as an extraheader for the server, in the environment only."""
    run = steps(flow("mxperf-main.yml"), "benchmarks")["Add the pairs to the history"]["run"]
    tools = tmp_path / "bin"
    tools.mkdir()
    record = 'echo "$* | $GIT_CONFIG_COUNT $GIT_CONFIG_KEY_0 $GIT_CONFIG_VALUE_0" >> added'
    (tools / "mxperf").write_text(
        f'#!/bin/sh\n{record}\ncase "$*" in *anchor*|*x) exit {add_exit};; esac\n'
    )
    (tools / "mxperf").chmod(0o755)
    (tmp_path / "step.sh").write_text(run)
    summary = tmp_path / "summary.md"
    summary.touch()
    env = {
        "PATH": f"{tools}:/usr/bin:/bin",
        "GITHUB_TOKEN": "tok",
        "GITHUB_SERVER_URL": "https://github.com",
        "ANCHOR_REPORT": anchor,
        "ANCHOR": "a" * 40,
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    status, out = run_script(tmp_path / "step.sh", tmp_path, env, timeout=30.0)
    assert status == add_exit, out
    header = "1 http.https://github.com/.extraheader AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46dG9r"
    lines = (tmp_path / "added").read_text().splitlines()
    assert lines[0] == f"history add mxperf.json | {header}"  # the chain's entries first
    assert lines[1:] == ([f"history add {anchor} | {header}"] if anchor else [])
    assert ("gates nothing" in summary.read_text()) == (anchor != "" and add_exit == 0)
    assert "::add-mask::eC1hY2Nlc3MtdG9rZW46dG9r" in out


@pytest.mark.parametrize(
    ("adopt_exit", "outputs", "passes"),
    [
        (0, {"report": "mxperf-pr/mxperf.json", "regressed": "0"}, True),
        (1, {"report": "mxperf-pr/mxperf.json", "regressed": "1"}, True),
        (3, {}, True),  # not this commit's code: the job pairs itself
        (2, {}, True),  # an unreadable report: a warning, and the job pairs itself
    ],
)
def test_the_adopt_step_passes_the_report_on_only_when_it_is_this_commits(
    tmp_path: Path, adopt_exit: int, outputs: dict[str, str], passes: bool
) -> None:
    run = steps(flow("mxperf-main.yml"), "benchmarks")["Adopt it when it measured this commit"]
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "mxperf").write_text(f'#!/bin/sh\necho "$*" >> called\nexit {adopt_exit}\n')
    (tools / "mxperf").chmod(0o755)
    (tmp_path / "mxperf-pr").mkdir()
    (tmp_path / "mxperf-pr" / "mxperf-summary.md").write_text("| the PR's table |\n")
    (tmp_path / "step.sh").write_text(run["run"])
    output, summary = tmp_path / "output.txt", tmp_path / "summary.md"
    env = {
        "PATH": f"{tools}:/usr/bin:/bin",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "PR_RUN": "77",
    }
    status, out = run_script(tmp_path / "step.sh", tmp_path, env, timeout=30.0)
    assert (status == 0) == passes, out
    assert (read_outputs(output) if output.exists() else {}) == outputs
    assert (
        tmp_path / "called"
    ).read_text() == "history adopt --no-fetch --check mxperf-pr/mxperf.json\n"
    told = summary.read_text() if summary.exists() else ""
    assert ("adopted the pair of pull request run 77" in told) == bool(outputs)
    assert ("| the PR's table |" in told) == bool(outputs)
    assert ("could not be read" in out) == (adopt_exit == 2)


@pytest.mark.parametrize(("adopt_exit", "passes"), [(0, True), (1, True), (2, False)])
def test_the_push_step_adopts_instead_of_adding_and_a_regression_fails_later(
    tmp_path: Path, adopt_exit: int, passes: bool
) -> None:
    run = steps(flow("mxperf-main.yml"), "benchmarks")["Add the pairs to the history"]["run"]
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "mxperf").write_text(f'#!/bin/sh\necho "$*" >> added\nexit {adopt_exit}\n')
    (tools / "mxperf").chmod(0o755)
    (tmp_path / "step.sh").write_text(run)
    env = {
        "PATH": f"{tools}:/usr/bin:/bin",
        "GITHUB_TOKEN": "tok",
        "GITHUB_SERVER_URL": "https://github.com",
        "ADOPTED": "mxperf-pr/mxperf.json",
        "ANCHOR_REPORT": "",
    }
    status, out = run_script(tmp_path / "step.sh", tmp_path, env, timeout=30.0)
    assert (status == 0) == passes, out
    assert (tmp_path / "added").read_text() == "history adopt mxperf-pr/mxperf.json\n"
    verdict = steps(flow("mxperf-main.yml"), "benchmarks")["The adopted pair's verdict"]
    assert verdict["if"] == "${{ !cancelled() && steps.adopt.outputs.regressed == '1' }}"
    assert "exit 1" in verdict["run"]


def test_no_other_workflow_gets_a_write_token_for_contents() -> None:
    """contents: write: the main job (its history) and the self-hosted refresh (its baselines),
    both running main's code only."""
    writers = []
    for path in sorted(FLOWS.glob("*.yml")):
        data = workflows.load(path)
        assert data["permissions"].get("contents") == "read", path.name
        for name, job in data["jobs"].items():
            if (job.get("permissions") or {}).get("contents") == "write":
                writers.append((path.name, name))
    assert writers == [("mxperf-main.yml", "benchmarks"), ("mxperf-self-hosted.yml", "refresh")]


def test_the_comment_job_never_runs_the_prs_code() -> None:
    comment = flow("mxperf-comment.yml")
    assert comment["on"] == {"workflow_run": {"workflows": ["mxperf-pr"], "types": ["completed"]}}
    assert flow("mxperf-pr.yml")["name"] == "mxperf-pr"
    assert comment["permissions"]["pull-requests"] == "write"
    s = steps(comment, "comment")
    checkout = s["Check out the default branch's requirements"]
    assert "ref" not in checkout["with"] and "repository" not in checkout["with"]
    assert next(iter(s)) == checkout["name"]  # first: checkout empties the folder
    download = s["Download the PR comment"]["with"]
    assert download["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["github-token"] == "${{ github.token }}"
    post = s["Post or update the comment"]
    assert post["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
    assert (
        "--head-sha" in post["run"] and "pytest" not in (FLOWS / "mxperf-comment.yml").read_text()
    )


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("github.event_name == 'PULL_REQUEST'", True),
        ("github.event_name != 'push' && steps.a.outputs.x == ''", True),
        ("!(steps.a.outputs.y == 'yes') || false", False),
        ("github.event.workflow_run.id", 42),
        ("github.event.missing.deeper", None),
        ("'it''s'", "it's"),
        # A skipped step's output is null, which GitHub's == takes as '' (both are 0).
        ("steps.skipped.outputs.report == ''", True),
        ("steps.skipped.outputs.report != ''", False),
        ("steps.a.outputs.y == 0", False),
        ("github.event.workflow_run.id == '42'", True),
    ],
)
def test_expressions(expression: str, value: Any) -> None:
    context = {
        "github": {"event_name": "pull_request", "event": {"workflow_run": {"id": 42}}},
        "steps": {"a": {"outputs": {"x": "", "y": "yes"}}},
    }
    assert Evaluator(context).evaluate(expression) == value


@pytest.mark.parametrize(
    "expression", ["fromJSON('{}')", "matrix.python", "a ||", "1 + 2", "github.x == 'a"]
)
def test_an_expression_the_harness_does_not_know_fails(expression: str) -> None:
    with pytest.raises(WorkflowError):
        Evaluator({"github": {}}).evaluate(expression)


def test_conditions_follow_the_job_status() -> None:
    ev = Evaluator({"github": {"event_name": "push"}}, Status(failed=False))
    assert workflows.condition(None, ev) and workflows.condition("always()", ev)
    assert workflows.condition("${{ github.event_name == 'push' }}", ev)
    ev.status.failed = True
    assert not workflows.condition(None, ev)
    assert not workflows.condition("github.event_name == 'push'", ev)  # success() && (...)
    assert workflows.condition("always()", ev) and workflows.condition("failure()", ev)


def test_hash_files_is_empty_when_no_file_matches(tmp_path: Path) -> None:
    """As GitHub's: ``hashFiles('x') != ''`` tells whether a step left the file x."""
    ev = Evaluator({}, hash_files=workflows.hash_files(tmp_path))
    assert ev.evaluate("hashFiles('mxperf.json')") == ""
    (tmp_path / "mxperf.json").write_text("{}")
    assert len(ev.evaluate("hashFiles('mxperf.json', 'missing')")) == 64


def test_repository_variables_and_a_fallback() -> None:
    ev = Evaluator({"vars": {"K": "2"}})
    assert ev.evaluate("vars.K || '5'") == "2"
    assert Evaluator({"vars": {}}).evaluate("vars.K || '5'") == "5"


def test_substitution_and_output_files(tmp_path: Path) -> None:
    ev = Evaluator({"github": {"sha": "abc", "flag": True}})
    assert workflows.substitute("x-${{ github.sha }}-${{github.flag}}", ev) == "x-abc-true"
    out = tmp_path / "out"
    out.write_text("a=1\nbody<<EOF\nline 1\nline=2\nEOF\nb=x=y\n")
    assert read_outputs(out) == {"a": "1", "body": "line 1\nline=2", "b": "x=y"}


def test_triggers() -> None:
    main = flow("mxperf-main.yml")
    assert workflows.triggered(main, "push", "refs/heads/main")
    assert not workflows.triggered(main, "push", "refs/heads/feature")
    assert not workflows.triggered(main, "pull_request", "refs/pull/1/merge")
    comment = flow("mxperf-comment.yml")
    assert workflows.triggered(comment, "workflow_run", "refs/heads/main", "mxperf-pr")
    assert not workflows.triggered(comment, "workflow_run", "refs/heads/main", "other")


HARNESS_FLOW = """
name: probe
on: [push]
jobs:
  one:
    runs-on: ubuntu-24.04
    env:
      WHO: ${{ github.event_name }}
    steps:
      - id: a
        run: |
          echo "x=from-a" >> "$GITHUB_OUTPUT"
          echo "LATER=set-by-a" >> "$GITHUB_ENV"
          mkdir -p tools && printf '#!/bin/sh\\necho tool-ran\\n' > tools/tool && chmod +x tools/tool
          echo "$PWD/tools" >> "$GITHUB_PATH"
      - name: b
        env:
          X: ${{ steps.a.outputs.x }}
        run: echo "$WHO $X $LATER $(tool)"
      - name: failing
        run: false | cat
      - name: skipped after a failure
        run: echo never
      - name: always
        if: always()
        run: echo "$GITHUB_EVENT_NAME $GITHUB_REF"
"""


def test_the_harness_carries_outputs_env_and_path_between_steps(tmp_path: Path) -> None:
    path = tmp_path / "probe.yml"
    path.write_text(HARNESS_FLOW)
    runner = Runner(tmp_path / "no-origin", tmp_path / "runner", "o/p", "http://127.0.0.1:9")
    job = runner.run(path, Event("push", "0" * 40, "refs/heads/main")).jobs["one"]
    assert job.step("b").output == "push from-a set-by-a tool-ran\n"
    assert job.step("failing").outcome == "failure"  # pipefail: false | cat fails
    assert job.step("skipped after a failure").outcome == "skipped"
    assert job.step("always").output == "push refs/heads/main\n"
    assert job.outcome == "failure"


def test_the_harness_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    path = tmp_path / "probe.yml"
    runner = Runner(tmp_path / "no-origin", tmp_path / "runner", "o/p", "http://127.0.0.1:9")
    push = Event("push", "0" * 40, "refs/heads/main")
    path.write_text(HARNESS_FLOW.replace("${{ github.event_name }}", "${{ matrix.os }}"))
    with pytest.raises(WorkflowError, match="context 'matrix'"):
        runner.run(path, push)
    path.write_text(HARNESS_FLOW.replace("- id: a\n", "- id: a\n        uses: someone/action@v1\n"))
    with pytest.raises(WorkflowError, match="no stand-in for someone/action@v1"):
        runner.run(path, push)
    with pytest.raises(WorkflowError, match="does not run on pull_request"):
        runner.run(path, Event("pull_request", "0" * 40, "refs/pull/1/merge"))


def test_a_step_over_its_time_is_ended_with_its_children(tmp_path: Path) -> None:
    script = tmp_path / "slow.sh"
    script.write_text(f"sleep 30 &\necho $! > {tmp_path}/child\nwait\n")
    code, out = run_script(script, tmp_path, {"PATH": "/usr/bin:/bin"}, timeout=1.0)
    assert code == -1 and "ran over 1 s" in out
    child = int((tmp_path / "child").read_text())
    assert not alive(child)


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a killed child is reaped by init: allow it a moment)."""
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.1)
    return True
