"""The recipe executed: examples/user-project's workflows run here, step by step
(`pytest_mxperf.testing.workflow_steps`), in a scratch repository made from the project, with a
fake GitHub API on 127.0.0.1 that records every call.

The install step is stood in for: ``python -m pip install -r requirements-perf.txt`` checks that
the file pins pytest-mxperf and installs nothing, because the plugin is importable in this test
environment already (the real install of the same project, from the wheel, is ``.ci/run``'s
wheel check). Most scenarios measure with the fake back end (a conftest.py the harness adds to
the copy; a change of speed is a change of ``fake_speeds.json``), so they take seconds; the
identical pull request is also run with real MXNet on one tiny case. Each rendered comment is
printed (``-s`` shows them; ``scripts/workflow_demo.py`` prints them too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf.testing import workflow_scenarios as ws
from pytest_mxperf.testing.repos import git
from pytest_mxperf.testing.workflow_steps import JobResult

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user-project"
SLOWER = "mlp/inference/float32/bs32/cpu"


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[ws.Scenarios]:
    with ws.scenarios(EXAMPLE, tmp_path / "scenario") as scenarios:
        yield scenarios


def ok(job: JobResult) -> JobResult:
    assert job.outcome == "success", job.log
    return job


def no_token_in(job: JobResult) -> bool:
    return all("GITHUB_TOKEN" not in s.env for s in job.steps)


def test_fork_pr_ten_percent_slower_then_fixed(fake: ws.Scenarios) -> None:
    """A fork's PR makes one case 10% slower: its job fails, with no token and no API call;
    the workflow_run job posts the comment. A second push fixes it: the comment is updated."""
    base = fake.project.main_sha()
    fake.project.set_speeds(MLP=7200.0)
    slower = fake.project.commit("mynets: a slower MLP")
    pr, comment = fake.pull_request(7, slower, fork=True)
    job = pr.jobs["benchmarks"]
    assert job.outcome == "failure"
    assert job.step("Benchmarks paired with the base branch").outcome == "failure"
    assert job.step("Render the PR comment").outcome == "success"
    assert no_token_in(job) and fake.calls[pr.run_id] == []
    assert f"`{SLOWER}`" in job.summary and "**regressed**" in job.summary
    ok(comment.jobs["comment"])
    assert [c.method for c in fake.calls[comment.run_id]] == ["GET", "GET", "POST"]
    assert all(c.token == fake.api.token for c in fake.calls[comment.run_id])
    first = ws.comment_of(fake, 7)
    print(f"\n--- fork PR, one case 10% slower (job failed):\n{first}")
    assert ":x: **mxperf: regressed** (4 cases: 3 pass, 1 regressed)" in first
    assert f"- `{SLOWER}`: regressed, -10.0% against `{base[:10]}`" in first
    assert "HEAD vs origin/main: -10.0%" in first
    # The API failing: a warning, and the comment job still succeeds.
    fake.api.fail_with = 502
    again = fake.comment(pr, 7, slower, fork=True)
    post = ok(again.jobs["comment"]).step("Post or update the comment")
    assert (
        "mxperf: warning: the comment was not posted" in post.output and "HTTP 502" in post.output
    )
    fake.api.fail_with = None

    fake.project.set_speeds(MLP=8000.0)
    fixed = fake.project.commit("mynets: the MLP as fast as before")
    pr, comment = fake.pull_request(7, fixed, fork=True)
    ok(pr.jobs["benchmarks"])
    ok(comment.jobs["comment"])
    assert [c.method for c in fake.calls[comment.run_id]] == ["GET", "GET", "PATCH"]
    second = ws.comment_of(fake, 7)  # one comment: updated, not posted again
    print(f"\n--- second push to the same PR (fixed):\n{second}")
    assert ":white_check_mark: **mxperf: pass** (4 cases: 4 pass)" in second
    assert f"at `{fixed[:10]}`, paired with `origin/main` (`{base[:10]}`)" in second
    assert len(fake.api.comments[7]) == 1


PAIR = "Benchmarks paired with the last commit in the history"
LOOKUP = "The pull request this push merged"
ADOPT = "Adopt it when it measured this commit"
ANCHOR = "Benchmarks paired with the anchor"


def pairs(entries: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted((e["case"], e["commit"], e["base"]) for e in entries)


def test_pushes_to_main_build_the_history(tmp_path: Path) -> None:
    """Each push to main pairs with the last commit in the history and pushes its entries to
    origin's mxperf-history branch; with an anchor every 2nd job (the repository variable),
    the second push also pairs with the history's first commit. A regressed pair fails the job
    and still goes into the history."""
    flows = {"MXPERF_ANCHOR_EVERY": "2"}
    with ws.scenarios(EXAMPLE, tmp_path / "scenario", variables=flows) as fake:
        first = fake.project.main_sha()
        (fake.project.work / "README.md").write_text("A change that moves no speed.\n")
        one = fake.project.commit("docs")
        run = fake.push_main(first)
        job = ok(run.jobs["benchmarks"])
        assert "mxperf verdicts: 4 pass" in job.step(PAIR).output
        assert "4 new of 4 entries" in job.step("Add the pairs to the history").output
        assert job.step(ANCHOR).outcome == "skipped"  # one commit with entries: not due
        # A direct push: no pull request to adopt the pair of (one API call to ask).
        assert "(a direct push): the job pairs itself" in job.step(LOOKUP).output
        assert [c.path for c in fake.calls[run.run_id]] == [f"/repos/{ws.REPO}/commits/{one}/pulls"]
        assert job.step("Download its pair").outcome == "skipped"
        stored = ws.history_on_origin(fake)
        cases = sorted(e["case"] for e in stored)
        assert len(cases) == 4 and pairs(stored) == [(c, one, first) for c in cases]
        assert {e["status"] for e in stored} == {"pass"}

        # Two commits in one push, the second making one case 10% slower: paired with the last
        # commit that has an entry (not HEAD's parent), and with the anchor (the first commit).
        (fake.project.work / "README.md").write_text("Another change of words.\n")
        fake.project.commit("docs again")
        fake.project.set_speeds(MLP=7200.0)
        two = fake.project.commit("mynets: a slower MLP")
        run = fake.push_main(one)
        job = run.jobs["benchmarks"]
        assert job.outcome == "failure" and job.step(PAIR).outcome == "failure", job.log
        ok_steps = ("Add the pairs to the history", "The anchor this job also pairs with", ANCHOR)
        assert all(job.step(n).outcome == "success" for n in ok_steps), job.log
        artifact = fake.runner.root / "artifacts" / str(run.run_id) / f"mxperf-main-{two}"
        assert json.loads((artifact / "mxperf.json").read_text())["paired"]["rev_sha"] == one
        anchor = json.loads((artifact / "mxperf-anchor.json").read_text())
        assert anchor["paired"]["rev_sha"] == first
        assert f"The anchor pair against `{first[:10]}` was added" in job.summary
        assert f"`{SLOWER}`" in job.summary and "**regressed**" in job.summary
        stored = ws.history_on_origin(fake)
        expected = [(c, one, first) for c in cases] + [
            (c, two, b) for c in cases for b in (one, first)
        ]
        assert pairs(stored) == sorted(expected)  # 12 entries: push 1's kept once, none twice
        status = {(e["case"], e["base"]): e["status"] for e in stored if e["commit"] == two}
        assert status[(SLOWER, one)] == "regressed" and status[(SLOWER, first)] == "regressed"
        page = (artifact / "mxperf-history.html").read_text()
        assert all(case in page for case in cases) and two[:10] in page
        # The pairs only measured: no second run of the regression, no profile round.
        report = json.loads((artifact / "mxperf.json").read_text())
        assert report["paired"]["confirmation"] is None
        assert report["paired"]["profile_rounds"] == [] == anchor["paired"]["profile_rounds"]
        # The token: in the push step's environment only, never in the clone's git config
        # (persist-credentials: false), so no benchmark could read it.
        # The lookup of a merged pull request has it too: only mxperf's own API reads run there.
        with_token = [s.name for s in job.steps if "GITHUB_TOKEN" in s.env]
        assert with_token == [LOOKUP, "Add the pairs to the history"]
        assert job.step("Add the pairs to the history").env["GITHUB_TOKEN"] == fake.api.token
        assert job.workspace is not None
        config = (job.workspace / ".git" / "config").read_text()
        assert "extraheader" not in config and fake.api.token not in config


def test_a_merged_pull_requests_pair_is_adopted_a_forks_is_not(fake: ws.Scenarios) -> None:
    """A pull request from a branch of the repository makes one case 10% slower and is merged
    anyway (squashed): the push's job adopts the PR run's pair (the same tree, paired with the
    same commit) instead of measuring it again, stores it as the merged commit's entries and
    fails on its regression. A fork's pull request, merged: its run is not adopted; the push's
    job pairs itself."""
    base = fake.project.main_sha()
    fake.project.set_speeds(MLP=7200.0)
    head = fake.project.commit("mynets: a slower MLP")
    pr, _ = fake.pull_request(8, head)
    assert pr.jobs["benchmarks"].outcome == "failure"  # the PR's own verdict: regressed
    run = fake.merge(8)
    merged = fake.project.main_sha()
    job = run.jobs["benchmarks"]
    calls = [c.path for c in fake.calls[run.run_id]]
    assert calls == [
        f"/repos/{ws.REPO}/commits/{merged}/pulls",
        f"/repos/{ws.REPO}/actions/workflows/mxperf-pr.yml/runs",
    ]
    assert job.step("Download its pair").outcome == "success", job.log
    adopt = job.step(ADOPT)
    assert (
        adopt.outcome == "success" and f"the pair of {head[:10]} with {base[:10]}" in adopt.output
    )
    assert job.step(PAIR).outcome == "skipped"  # nothing measured twice
    assert "4 new in branch mxperf-history" in job.step("Add the pairs to the history").output
    assert job.outcome == "failure"
    assert job.step("The adopted pair's verdict").outcome == "failure"
    assert f"adopted the pair of pull request run {pr.run_id}" in job.summary
    stored = ws.history_on_origin(fake)
    assert {(e["commit"], e["base"], e["measured"]) for e in stored} == {(merged, base, head)}
    slower = next(e for e in stored if e["case"] == SLOWER)
    assert slower["status"] == "regressed" and slower["ratio"] == pytest.approx(0.9, abs=0.02)

    fake.project.set_speeds(MLP=8000.0)
    fork_head = fake.project.commit("mynets: the MLP as fast as before")
    fake.pull_request(9, fork_head, fork=True)
    job = ok(fake.merge(9, fork=True).jobs["benchmarks"])
    assert "came from someone/user-project, not octo/user-project" in job.step(LOOKUP).output
    assert job.step(ADOPT).outcome == "skipped" and job.step(PAIR).outcome == "success"
    fixed = fake.project.main_sha()
    mine = [e for e in ws.history_on_origin(fake) if e["commit"] == fixed]
    assert len(mine) == 4 and all("measured" not in e and e["base"] == merged for e in mine)


def test_self_hosted_refresh_then_push(fake: ws.Scenarios) -> None:
    """The manual refresh stores baselines on their branch; the next push to main compares
    with them (no pair)."""
    refresh = fake.dispatch("mxperf-self-hosted.yml")
    assert refresh.jobs["benchmarks"].outcome == "skipped"
    ok(refresh.jobs["refresh"])
    stored = git(fake.project.origin, "ls-tree", "-r", "--name-only", "mxperf-baselines")
    refreshed = fake.project.main_sha()
    assert stored.splitlines() == [f"baselines/mxperf-bench-cpu/{refreshed}.json"]
    before = refreshed
    (fake.project.work / "README.md").write_text("Nothing measured changes.\n")
    fake.project.commit("docs")
    push = fake.push_main(before, "mxperf-self-hosted.yml")
    assert push.jobs["refresh"].outcome == "skipped"
    job = ok(push.jobs["benchmarks"])
    report = json.loads((job.workspace / "mxperf.json").read_text())  # type: ignore[operator]
    assert "paired" not in report
    verdicts = {c["verdict"]["status"] for c in report["cases"]}
    assert verdicts == {"pass"}, job.log
    assert {c["verdict"]["baseline_commit"] for c in report["cases"]} == {refreshed}


def test_identical_pr_with_real_mxnet(tmp_path: Path) -> None:
    """An identical PR (a README change) from the repository itself, measured with real MXNet
    on one tiny case: the job passes and the comment says so."""
    pytest.importorskip("mxnet")
    with ws.scenarios(EXAMPLE, tmp_path / "real", fake=False, env=ws.QUICK_REAL) as real:
        (real.project.work / "README.md").write_text("Only the words change.\n")
        sha = real.project.commit("docs")
        pr, comment = real.pull_request(3, sha)
        ok(pr.jobs["benchmarks"])
        ok(comment.jobs["comment"])
        body = ws.comment_of(real, 3)
        print(f"\n--- identical PR, real MXNet:\n{body}")
        # The job passed; on a loaded machine the rounds may not decide the case (inconclusive,
        # which passes): the counts say which.
        assert re.search(
            r":white_check_mark: \*\*mxperf: pass\*\* \(1 case: 1 (pass|inconclusive)\)", body
        )
        assert "`tiny_cnn/inference/float32/bs16/cpu`" in body
