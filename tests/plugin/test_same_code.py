"""A stored-baseline case off its figure when the code is the baseline commit's (only the
baseline files differ, as in CI right after a baseline commit): no paired run is needed to say
the code is not slower, so none is run; a software change since the baseline still fails."""

from __future__ import annotations

import json
from typing import Callable

import pytest

from pytest_mxperf.system import gitinfo
from pytest_mxperf.testing.repos import (
    read_report,
    stored_files,
    worktrees,
)

FAST, STEADY = "fast/inference/float32/bs8/cpu", "steady/inference/float32/bs8/cpu"


@pytest.fixture
def stored_faster(store_elsewhere: Callable[..., str]) -> str:
    return store_elsewhere(code_changed=False, calibration=True)


def test_same_code_on_another_machine_is_machine_without_a_pair(
    fake_pytester: pytest.Pytester, stored_faster: str
) -> None:
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    label = stored_faster[:10]
    result.stdout.fnmatch_lines(
        [
            f"*mxperf: the stored baselines (commit {label}) do not hold on this machine: it "
            "runs the calibration probe at 0.71x their machine's speed (beyond 1.25x); the "
            f"code is the baseline commit {label}'s: only baseline files differ, so no paired "
            "run is needed*",
            "*mxperf verdicts: 2 machine*",
        ]
    )
    assert "paired run vs" not in result.stdout.str()  # no side was started
    report = read_report(fake_pytester.path)
    assert "joint_pair" not in report
    assert report["calibration"]["paired_with"] is None
    assert "only baseline files differ" in report["calibration"]["why_not_paired"]
    for case in report["cases"]:
        verdict = case["verdict"]
        assert verdict["status"] == "machine"
        assert verdict["message"].splitlines()[1] == (
            f"but the code is the baseline commit {label}'s (only baseline files differ): the "
            "stored figure does not hold on this machine (the baseline was measured on another "
            "machine). Store a baseline for this machine with --mxperf-update (or name it with "
            "--mxperf-machine)"
        )
    assert len(worktrees(fake_pytester.path)) == 1


def test_a_changed_file_outside_the_baselines_is_paired(
    fake_pytester: pytest.Pytester, stored_faster: str, commit: Callable[[str], str]
) -> None:
    # Any other file may change what is measured (a helper module, data): then a pair judges.
    (fake_pytester.path / "helper.py").write_text("SCALE = 1\n")  # untracked counts too
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(passed=2)
    report = read_report(fake_pytester.path)
    assert report["calibration"]["paired_with"] == stored_faster
    assert len(report["joint_pair"]["rounds"]) >= 2
    assert {c["verdict"]["status"] for c in report["cases"]} == {"machine"}


def test_same_code_with_changed_software_still_fails(
    fake_pytester: pytest.Pytester, stored_faster: str, commit: Callable[[str], str]
) -> None:
    # The stored figures came from another MXNet: the drop may be the upgrade, so it stands.
    for path in stored_files(fake_pytester.path):
        data = json.loads(path.read_text())
        for case in data["cases"].values():
            case["software"]["mxnet"] = "1.8.0"
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    commit("C: the baselines of an older MXNet")
    result = fake_pytester.runpytest("--mxperf", "--mxperf-json", "report.json")
    result.assert_outcomes(failed=2)
    label = stored_faster[:10]
    for case in read_report(fake_pytester.path)["cases"]:
        assert case["verdict"]["status"] == "regressed"
        assert (
            f"the code is the baseline commit {label}'s (only baseline files differ), so the "
            "drop comes from what changed since the baseline: mxnet: 1.8.0 -> "
        ) in case["verdict"]["message"]


def test_differs_from_names_tracked_and_untracked_changes_outside_the_excluded(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> None:
    root = fake_pytester.path
    (root / "model.py").write_text("A = 1\n")
    (root / "baselines").mkdir()
    (root / "baselines" / "x.json").write_text("{}\n")
    sha = commit("A")
    assert gitinfo.differs_from(str(root), sha, ("baselines",)) == []
    (root / "baselines" / "x.json").write_text('{"b": 1}\n')
    (root / "baselines" / "y.json").write_text("{}\n")
    assert gitinfo.differs_from(str(root), sha, (str(root / "baselines"),)) == []
    assert gitinfo.differs_from(str(root), sha) == ["baselines/x.json", "baselines/y.json"]
    (root / "model.py").write_text("A = 2\n")
    (root / "data.txt").write_text("new\n")
    assert gitinfo.differs_from(str(root), sha, ("baselines",)) == ["data.txt", "model.py"]
    commit("B")
    assert gitinfo.differs_from(str(root), sha, ("baselines",)) == ["data.txt", "model.py"]
    assert gitinfo.differs_from(str(root), "no-such-rev") is None
    assert gitinfo.differs_from(None, sha) is None
