"""Which commits a main-branch job pairs with: the last commit with an entry (skipping commits
without one), and on schedule the anchor (the last tag with entries, else the first commit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from history_data import entry

from pytest_mxperf.history import anchors
from pytest_mxperf.testing.repos import git


def _line(path: Path, n: int) -> list[str]:
    git(path, "init", "-q", "-b", "main")
    shas = []
    for i in range(n):
        git(path, "commit", "-q", "--allow-empty", "-m", f"c{i}")
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


def test_base_is_the_last_commit_with_an_entry_or_the_parent_at_first(tmp_path: Path) -> None:
    c = _line(tmp_path, 5)
    assert anchors.base(tmp_path, []) == c[3]
    found = [entry(c[1], c[0]), entry(c[2], c[1])]
    assert anchors.base(tmp_path, found) == c[2]  # c3 has no entry: its job was skipped
    assert anchors.base(tmp_path, [*found, entry(c[4], c[2])]) == c[2]  # HEAD's own rerun


def test_the_anchor_is_due_every_k_commits_and_prefers_a_tag(tmp_path: Path) -> None:
    c = _line(tmp_path, 6)
    found = [entry(c[i + 1], c[i]) for i in range(4)]  # c0..c4 have entries; HEAD is c5
    assert anchors.anchor(tmp_path, found, every=5) == c[0]  # 5 commits before HEAD
    assert anchors.anchor(tmp_path, found, every=2) is None  # 5 is not a multiple of 2
    git(tmp_path, "tag", "-a", "v1", c[2], "-m", "release")
    assert anchors.anchor(tmp_path, found, every=5) == c[2]
    git(tmp_path, "tag", "v2", c[4])  # a tag on the chain's own base: no extra pair
    assert anchors.anchor(tmp_path, found, every=5) is None
    with pytest.raises(anchors.AnchorError, match="--every must be >= 1"):
        anchors.anchor(tmp_path, found, every=0)


def test_no_parent_to_pair_with_is_said(tmp_path: Path) -> None:
    _line(tmp_path, 1)
    with pytest.raises(anchors.AnchorError, match="no parent commit to pair with"):
        anchors.base(tmp_path, [])
