"""A GitHub Actions job run here, step by step, for tests of the example workflows.

Each ``run:`` step is a bash script (``bash --noprofile --norc -eo pipefail``, as GitHub runs
it) in the job's workspace, with the variables GitHub sets (``GITHUB_EVENT_NAME``,
``GITHUB_SHA``, ``GITHUB_REF``, ``GITHUB_BASE_REF``, ``GITHUB_REPOSITORY``,
``GITHUB_EVENT_PATH``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``, ``GITHUB_ENV``,
``GITHUB_PATH``, ``RUNNER_TEMP``, ...); outputs, environment and path files are read back
between steps. ``uses:`` steps are stood in for:

- ``actions/checkout``: a clone of the origin repository at the event's commit (full history);
- ``actions/setup-python``: an interpreter on PATH that is this one; its ``-m venv`` makes a
  venv of shims to this interpreter and its ``-m pip install -r FILE`` checks that FILE names
  pytest-mxperf and installs nothing (the plugin is importable here already); a self-hosted
  runner's own python3 is the same interpreter;
- ``actions/cache``: a miss; ``upload-artifact`` / ``download-artifact``: a folder per run.

A token exists only where the workflow passes ``${{ github.token }}`` or
``${{ secrets.GITHUB_TOKEN }}``, or where checkout keeps it (``persist-credentials``, true by
default: an extraheader in the clone's git config, as actions/checkout writes it); the event says
what that token is (none in a fork's pull-request run).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mxperf.testing import workflows
from pytest_mxperf.testing.workflow_actions import (
    StandIn,
    checkout,
    download,
    read_outputs,
    setup_python,
    upload,
)
from pytest_mxperf.testing.workflows import Evaluator, Status, WorkflowError

#: Variables of this process that a job on a fresh runner would not have.
_DROPPED = ("GITHUB_", "RUNNER_", "PYTEST_MXPERF_", "PYTEST_XDIST_", "CI_COMMIT_")
_DROPPED_NAMES = ("CI", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "GIT_DIR", "GIT_WORK_TREE")


@dataclass
class Event:
    """What started a run: ``name`` (pull_request, push, workflow_run, workflow_dispatch), the
    commit and ref it runs at, its payload, and ``token``: what ``github.token`` is."""

    name: str
    sha: str
    ref: str
    payload: dict[str, Any] = field(default_factory=dict)
    base_ref: str = ""
    head_ref: str = ""
    token: str = ""
    source: str = ""  # workflow_run: the name of the workflow that finished


@dataclass
class StepResult:
    name: str
    outcome: str  # success, failure, skipped
    output: str = ""
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class JobResult:
    name: str
    outcome: str = "success"
    steps: list[StepResult] = field(default_factory=list)
    summary: str = ""
    workspace: Path | None = None

    def step(self, name: str) -> StepResult:
        return next(s for s in self.steps if s.name == name)

    @property
    def log(self) -> str:
        return "\n".join(f"--- {s.name} [{s.outcome}]\n{s.output}" for s in self.steps)


@dataclass
class RunResult:
    run_id: int
    workflow: str
    jobs: dict[str, JobResult]

    @property
    def conclusion(self) -> str:
        ran = [j.outcome for j in self.jobs.values() if j.outcome != "skipped"]
        return "failure" if "failure" in ran else "success"


@dataclass
class Runner:
    """Runs workflows of a repository whose GitHub copy is the bare repository ``origin``;
    ``root`` holds workspaces, runner temp folders and artifacts. ``env``: more variables for
    every step (the tests' settings, e.g. shorter measuring); ``vars``: the repository's
    configuration variables (the ``vars`` context)."""

    origin: Path
    root: Path
    repo: str
    api_url: str
    env: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    timeout: float = 600.0
    runs: int = 0

    def run(self, path: Path, event: Event) -> RunResult:
        workflow = workflows.load(path)
        if not workflows.triggered(workflow, event.name, event.ref, event.source):
            raise WorkflowError(f"{path.name} does not run on {event.name} of {event.ref}")
        self.runs += 1
        result = RunResult(self.runs, str(workflow.get("name", path.stem)), {})
        for job_id, job in workflow["jobs"].items():
            if job.get("needs"):
                raise WorkflowError(f"{path.name}: jobs with needs: are not run by the harness")
            result.jobs[job_id] = self._job(workflow, job_id, job, event, result.run_id)
        return result

    def _context(self, event: Event, run_id: int, env: Mapping[str, str]) -> dict[str, Any]:
        github = {
            "event_name": event.name,
            "event": event.payload,
            "sha": event.sha,
            "ref": event.ref,
            "base_ref": event.base_ref,
            "head_ref": event.head_ref,
            "repository": self.repo,
            "run_id": str(run_id),
            "server_url": "https://github.com",
            "api_url": self.api_url,
            "token": event.token,
        }
        runner = {"os": "Linux", "temp": env.get("RUNNER_TEMP", "")}
        return {
            "github": github,
            "runner": runner,
            "env": dict(env),
            "vars": dict(self.vars),
            # GitHub's own secret, the job's token (as github.token); no others here.
            "secrets": {"GITHUB_TOKEN": event.token} if event.token else {},
        }

    def _job(
        self,
        workflow: Mapping[str, Any],
        job_id: str,
        job: Mapping[str, Any],
        event: Event,
        run_id: int,
    ) -> JobResult:
        home = self.root / f"run{run_id}-{job_id}"
        ws, temp = home / "workspace", home / "temp"
        ws.mkdir(parents=True)
        temp.mkdir()
        (home / "event.json").write_text(json.dumps(event.payload))
        files = {n: home / f"{n}.txt" for n in ("summary", "path", "env")}
        for f in files.values():
            f.touch()
        env = self._base_env(event, run_id, ws, temp, files, home / "event.json")
        labels = job.get("runs-on")
        if isinstance(labels, list) and "self-hosted" in labels:
            # A self-hosted runner's own python3 (no setup-python): this interpreter too.
            env["PATH"] = os.pathsep.join([str(setup_python(self.root / "toolcache")), env["PATH"]])
        ctx = self._context(event, run_id, env)
        evaluator = Evaluator(ctx, Status(), workflows.hash_files(ws))
        for scope in (workflow.get("env") or {}, job.get("env") or {}):
            env.update({k: workflows.substitute(str(v), evaluator) for k, v in scope.items()})
        ctx["env"] = dict(env)
        result = JobResult(job_id, workspace=ws)
        if not workflows.condition(job.get("if"), evaluator):
            result.outcome = "skipped"
            return result
        ctx["steps"] = {}
        for index, step in enumerate(job.get("steps") or []):
            name = str(step.get("name") or step.get("uses") or f"step {index}")
            if not workflows.condition(step.get("if"), evaluator):
                result.steps.append(StepResult(name, "skipped"))
                continue
            done, outputs = self._step(step, name, env, evaluator, ws, home / f"out{index}", run_id)
            self._read_files(env, files)
            ctx["env"] = dict(env)
            result.steps.append(done)
            if "id" in step:
                ctx["steps"][step["id"]] = {"outputs": outputs, "outcome": done.outcome}
            # continue-on-error: the step's outcome stays "failure", the job goes on as if
            # it had succeeded (its conclusion), as on GitHub.
            if done.outcome == "failure" and step.get("continue-on-error") not in (True, "true"):
                evaluator.status.failed = True
                result.outcome = "failure"
        result.summary = files["summary"].read_text(encoding="utf-8")
        return result

    def _base_env(
        self,
        event: Event,
        run_id: int,
        ws: Path,
        temp: Path,
        files: Mapping[str, Path],
        event_path: Path,
    ) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(_DROPPED) and k not in _DROPPED_NAMES
        }
        env.update(
            CI="true",
            GITHUB_ACTIONS="true",
            GITHUB_EVENT_NAME=event.name,
            GITHUB_EVENT_PATH=str(event_path),
            GITHUB_SHA=event.sha,
            GITHUB_REF=event.ref,
            GITHUB_BASE_REF=event.base_ref,
            GITHUB_HEAD_REF=event.head_ref,
            GITHUB_REPOSITORY=self.repo,
            GITHUB_RUN_ID=str(run_id),
            GITHUB_SERVER_URL="https://github.com",
            GITHUB_API_URL=self.api_url,
            GITHUB_WORKSPACE=str(ws),
            GITHUB_STEP_SUMMARY=str(files["summary"]),
            GITHUB_PATH=str(files["path"]),
            GITHUB_ENV=str(files["env"]),
            RUNNER_TEMP=str(temp),
            RUNNER_OS="Linux",
            # The machine-wide device locks of this job's runs are its own (a runner to itself).
            TMPDIR=str(temp),
        )
        env.update(self.env)
        return env

    def _read_files(self, env: dict[str, str], files: Mapping[str, Path]) -> None:
        env.update(read_outputs(files["env"]))
        added = [line.strip() for line in files["path"].read_text().splitlines() if line.strip()]
        base = env.get("_HARNESS_BASE_PATH") or env.get("PATH", "")
        env["_HARNESS_BASE_PATH"] = base
        env["PATH"] = os.pathsep.join([*reversed(added), base])

    def _step(
        self,
        step: Mapping[str, Any],
        name: str,
        env: dict[str, str],
        evaluator: Evaluator,
        ws: Path,
        home: Path,
        run_id: int,
    ) -> tuple[StepResult, dict[str, str]]:
        step_env = dict(env)
        step_env.update(
            {k: workflows.substitute(str(v), evaluator) for k, v in (step.get("env") or {}).items()}
        )
        home.mkdir()
        output_file = home / "output.txt"
        output_file.touch()
        step_env["GITHUB_OUTPUT"] = str(output_file)
        inputs = {
            k: workflows.substitute(str(v), evaluator) for k, v in (step.get("with") or {}).items()
        }
        try:
            if "uses" in step:
                token = str(evaluator.context["github"]["token"] or "")
                text, outputs = self._uses(str(step["uses"]), inputs, env, ws, run_id, token)
                return StepResult(name, "success", text, step_env), outputs
            script = home / "script.sh"
            script.write_text(workflows.substitute(str(step["run"]), evaluator))
            cwd = ws / str(step.get("working-directory", "."))
            code, text = run_script(script, cwd, step_env, self.timeout)
        except StandIn as exc:
            return StepResult(name, "failure", str(exc), step_env), {}
        outcome = "success" if code == 0 else "failure"
        return StepResult(name, outcome, text, step_env), read_outputs(output_file)

    def _uses(
        self,
        action: str,
        inputs: Mapping[str, str],
        env: dict[str, str],
        ws: Path,
        run_id: int,
        token: str = "",
    ) -> tuple[str, dict[str, str]]:
        name = action.split("@")[0]
        if name == "actions/checkout":
            persist = inputs.get("persist-credentials", "true").lower() != "false"
            return checkout(self.origin, ws, env["GITHUB_SHA"], token, persist), {}
        if name == "actions/setup-python":
            bin_dir = setup_python(self.root / "toolcache")
            env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
            env["_HARNESS_BASE_PATH"] = env["PATH"]
            return f"python {platform.python_version()}", {
                "python-version": platform.python_version(),
                "python-path": str(bin_dir / "python"),
            }
        if name == "actions/cache":
            return "cache miss (stood in for: nothing is cached)", {"cache-hit": "false"}
        if name == "actions/upload-artifact":
            return upload(self.root / "artifacts" / str(run_id), ws, inputs), {}
        if name == "actions/download-artifact":
            return download(self.root / "artifacts", ws, inputs, run_id), {}
        raise WorkflowError(f"the harness has no stand-in for {action}")


def run_script(script: Path, cwd: Path, env: Mapping[str, str], timeout: float) -> tuple[int, str]:
    """A ``run:`` script as GitHub runs it: ``(exit status, output)``. In a session of its own:
    on timeout every process it started (a pytest run and its sides) is ended with it."""
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -1, f"{out}\nharness: the step ran over {timeout:.0f} s and was ended"
    return proc.returncode, out
