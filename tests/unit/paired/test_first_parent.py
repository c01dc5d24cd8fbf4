"""The first-parent line of a revision (`gitcmd.first_parent`): the one reader of it, used by the
history of paired ratios (base, anchor, the index's order), bisect's candidates and the history
page of stored baselines; all of them see the same line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mxperf.history import anchors, bisection
from pytest_mxperf.history.index import line_of
from pytest_mxperf.paired.gitcmd import WorktreeError, first_parent
from pytest_mxperf.reporting.historygit import git_facts
from pytest_mxperf.testing.repos import commits, git


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], str]:
    """main: c0, c1, a merge of a side branch (s1), c3; returns the repo, main's line, s1."""
    root = tmp_path_factory.mktemp("line")
    git(root, "init", "-q", "-b", "main")
    shas = commits(root, [f"c{n}: main's work" for n in range(2)])
    git(root, "checkout", "-qb", "side")
    (root / "g.txt").write_text("side\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "s1: on a side branch")
    side = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "-m", "m2: merge side", "side")
    shas.append(git(root, "rev-parse", "HEAD"))
    (root / "f.txt").write_text("3\n")
    git(root, "commit", "-qam", "c3: after the merge")
    shas.append(git(root, "rev-parse", "HEAD"))
    return root, shas, side


def test_the_line_oldest_first_without_the_side_branch(repo: tuple[Path, list[str], str]) -> None:
    root, shas, side = repo
    line = first_parent(root)
    assert [c.sha for c in line] == shas and side not in [c.sha for c in line]
    assert [c.subject for c in line] == [
        "c0: main's work",
        "c1: main's work",
        "m2: merge side",
        "c3: after the merge",
    ]
    assert all(c.date[:4].isdigit() and "T" in c.date for c in line)  # ISO 8601
    assert [c.sha for c in first_parent(root, shas[2])] == shas[:3]
    assert [c.sha for c in first_parent(root, since=shas[1])] == shas[2:]
    assert [c.sha for c in first_parent(root, limit=2)] == shas[2:]


def test_where_git_cannot_tell_nothing_or_with_check_why(
    repo: tuple[Path, list[str], str], tmp_path: Path
) -> None:
    root, _, _ = repo
    assert first_parent(None) == [] and first_parent(root, "no-such-rev") == []
    assert first_parent(root, "--all") == []  # never read as an option
    with pytest.raises(WorktreeError, match="no-such-rev"):
        first_parent(root, "no-such-rev", check=True)
    git(tmp_path, "init", "-q")
    assert first_parent(tmp_path) == []  # an empty repository has no HEAD


def test_history_bisect_and_the_page_read_the_same_line(
    repo: tuple[Path, list[str], str],
) -> None:
    root, shas, _ = repo
    assert line_of(root) == shas
    assert bisection.candidates(root, shas[0], shas[-1]) == shas[1:]
    facts = git_facts(root)
    assert [c.sha for c in facts.first_parent] == shas and facts.head == shas[-1]
    assert facts.first_parent[2].subject == "m2: merge side"
    # The chain's base when no commit has an entry yet: HEAD's first parent (the merge).
    assert anchors.base(root, [], shas[-1]) == shas[2]
