"""Commit facts and ancestry from real (tiny) git repositories."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from pytest_mxperf.system import codec
from pytest_mxperf.system.gitinfo import CommitInfo, ancestry, detect, rev_parse

IDENTITY = {
    "GIT_AUTHOR_NAME": "mxperf test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "mxperf test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(path: Path, *args: str, date: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(IDENTITY, HOME=str(path))
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    done = subprocess.run(
        ["git", *args], cwd=path, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.n = 0
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", "main")

    def commit(self, message: str = "", *, file: str = "file.txt") -> str:
        self.n += 1
        target = self.path / file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{message or 'change'} {self.n}\n")
        git(self.path, "add", "-A")
        # one commit per day, in order, in UTC
        date = f"2024-01-{self.n:02d}T12:00:00+00:00"
        git(self.path, "commit", "-q", "-m", message or f"c{self.n}", date=date)
        return git(self.path, "rev-parse", "HEAD")

    def git(self, *args: str) -> str:
        return git(self.path, *args)


@pytest.fixture(autouse=True)
def _no_git_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # GitPython's own git calls must not pick up a repository from the environment.
    for name in list(os.environ):
        if name.startswith("GIT_"):
            monkeypatch.delenv(name)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


def test_detect_clean_repo(repo: Repo) -> None:
    repo.commit("first")
    sha = repo.commit("second")
    info = detect(repo.path, {})
    assert info.sha == sha
    assert info.date == "2024-01-02T12:00:00+00:00"
    assert info.branch == "main"
    assert info.dirty is False
    assert info.source == "git"
    assert info.repo_root == str(repo.path)
    assert info.shallow is False
    assert info.short == sha[:10]
    assert info.tree == repo.git("rev-parse", "HEAD^{tree}")


def test_the_tree_is_recorded_for_the_commit_checked_out_only(repo: Repo) -> None:
    first = repo.commit()
    repo.commit()
    # A CI variable naming another commit: its facts, but not a tree that was not measured.
    assert detect(repo.path, {"PYTEST_MXPERF_COMMIT": first}).tree is None
    repo.git("checkout", "-q", "--detach", first)
    assert detect(repo.path, {"GITHUB_SHA": first}).tree == repo.git("rev-parse", "HEAD^{tree}")


def test_detect_from_a_subdirectory(repo: Repo) -> None:
    sha = repo.commit(file="sub/dir/f.txt")
    info = detect(repo.path / "sub" / "dir", {})
    assert info.sha == sha
    assert info.repo_root == str(repo.path)


def test_dirty_only_for_tracked_changes(repo: Repo) -> None:
    repo.commit(file="tracked.txt")
    (repo.path / "untracked.txt").write_text("new\n")
    assert detect(repo.path, {}).dirty is False
    (repo.path / "tracked.txt").write_text("edited\n")
    assert detect(repo.path, {}).dirty is True


def test_staged_change_is_dirty(repo: Repo) -> None:
    repo.commit(file="tracked.txt")
    (repo.path / "other.txt").write_text("x\n")
    repo.git("add", "other.txt")
    assert detect(repo.path, {}).dirty is True


def test_changes_under_an_excluded_path_do_not_count(repo: Repo) -> None:
    repo.commit(file="baselines/cpu-x-2c/abc.json")
    repo.commit(file="src.py")
    (repo.path / "baselines" / "cpu-x-2c" / "abc.json").write_text("{}\n")
    assert detect(repo.path, {}).dirty is True
    assert detect(repo.path, {}, exclude=("baselines",)).dirty is False
    (repo.path / "src.py").write_text("changed\n")
    assert detect(repo.path, {}, exclude=("baselines",)).dirty is True


def test_env_commit_override_wins(repo: Repo) -> None:
    first = repo.commit()
    repo.commit()
    env = {"PYTEST_MXPERF_COMMIT": first[:8], "PYTEST_MXPERF_BRANCH": "release", "GITHUB_SHA": "f"}
    info = detect(repo.path, env)
    assert info.sha == first  # expanded from the abbreviation
    assert info.date == "2024-01-01T12:00:00+00:00"
    assert info.branch == "release"
    assert info.source == "env:PYTEST_MXPERF_COMMIT"


def test_github_variables(repo: Repo) -> None:
    sha = repo.commit()
    env = {"GITHUB_SHA": sha, "GITHUB_HEAD_REF": "", "GITHUB_REF_NAME": "feature/x"}
    info = detect(repo.path, env)
    assert (info.sha, info.branch, info.source) == (sha, "feature/x", "env:GITHUB_SHA")
    env["GITHUB_HEAD_REF"] = "pr-branch"
    assert detect(repo.path, env).branch == "pr-branch"


def test_env_sha_unknown_to_the_clone_is_kept(repo: Repo) -> None:
    repo.commit()
    info = detect(repo.path, {"GITHUB_SHA": "1234567" * 5 + "12345"})
    assert info.sha == "1234567" * 5 + "12345"
    assert info.date is None
    assert info.branch == "main"  # from git, as CI gave none


def test_detached_head_has_no_branch(repo: Repo) -> None:
    first = repo.commit()
    repo.commit()
    repo.git("checkout", "-q", "--detach", first)
    info = detect(repo.path, {})
    assert info.sha == first
    assert info.branch is None


def test_no_repository(tmp_path: Path) -> None:
    info = detect(tmp_path, {})
    assert info == CommitInfo(None, None, None, None, "none")
    assert info.short == "unknown"


def test_no_repository_with_ci_sha(tmp_path: Path) -> None:
    info = detect(tmp_path, {"CI_COMMIT_SHA": " abcdef1 ", "CI_COMMIT_REF_NAME": "main"})
    assert (info.sha, info.branch, info.source) == ("abcdef1", "main", "env:CI_COMMIT_SHA")
    assert info.dirty is None and info.repo_root is None


def test_empty_repository_never_raises(repo: Repo) -> None:
    info = detect(repo.path, {})
    assert info.sha is None
    assert info.source == "git"


def test_commit_info_round_trip(repo: Repo) -> None:
    repo.commit()
    info = detect(repo.path, {})
    assert codec.from_dict(CommitInfo, codec.to_dict(info)) == info


def test_ancestry_along_a_branch(repo: Repo) -> None:
    shas = [repo.commit() for _ in range(4)]
    dist = ancestry(str(repo.path), shas[-1])
    assert dist == {shas[3]: 0, shas[2]: 1, shas[1]: 2, shas[0]: 3}
    assert ancestry(str(repo.path), shas[1]) == {shas[1]: 0, shas[0]: 1}


def test_ancestry_across_a_merge(repo: Repo) -> None:
    base = repo.commit()
    repo.git("checkout", "-q", "-b", "side")
    side1 = repo.commit(file="side.txt")
    side2 = repo.commit(file="side.txt")
    repo.git("checkout", "-q", "main")
    main1 = repo.commit(file="main.txt")
    repo.git("merge", "-q", "--no-ff", "-m", "merge", "side")
    merge = repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "-b", "unrelated-work", base)
    unrelated = repo.commit(file="elsewhere.txt")
    dist = ancestry(str(repo.path), merge)
    assert dist is not None
    assert dist[merge] == 0
    assert dist[main1] == 1
    assert dist[side2] == 1  # second parent: as near as the first
    assert dist[side1] == 2
    assert dist[base] == 2  # nearest path, via main1
    assert unrelated not in dist
    assert set(dist) == {merge, main1, side1, side2, base}


def test_ancestry_without_repository_or_sha(tmp_path: Path, repo: Repo) -> None:
    sha = repo.commit()
    assert ancestry(None, sha) is None
    assert ancestry(str(repo.path), None) is None
    assert ancestry(str(tmp_path / "nowhere"), sha) is None
    assert ancestry(str(repo.path), "f" * 40) is None  # unknown commit


def test_ancestry_limit(repo: Repo) -> None:
    shas = [repo.commit() for _ in range(5)]
    assert set(ancestry(str(repo.path), shas[-1], limit=2) or {}) == {shas[4], shas[3]}


def test_shallow_clone(repo: Repo, tmp_path: Path) -> None:
    repo.commit()
    repo.commit()
    head = repo.commit()
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo.path}", str(clone))
    info = detect(clone, {})
    assert info.shallow is True
    assert info.sha == head
    assert detect(repo.path, {}).shallow is False
    assert ancestry(str(clone), head) == {head: 0}


def test_rev_parse(repo: Repo) -> None:
    first = repo.commit()
    head = repo.commit()
    root = str(repo.path)
    assert rev_parse(root, "main") == head
    assert rev_parse(root, "HEAD~1") == first
    assert rev_parse(root, first[:7]) == first
    assert rev_parse(root, "no-such-branch") is None
    assert rev_parse(root, "HEAD~99") is None
    assert rev_parse(None, "main") is None


def _git_children() -> list[str]:
    pids: list[str] = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that just ended
            pids += (task / "children").read_text().split()
    cmdlines = []
    for pid in pids:
        with contextlib.suppress(OSError):  # already gone
            cmdlines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return [c for c in cmdlines if c.startswith("git")]


@pytest.mark.skipif(
    not Path(f"/proc/self/task/{os.getpid()}/children").exists(),
    reason="needs Linux /proc/<pid>/task/<tid>/children",
)
def test_no_git_process_outlives_a_call(repo: Repo) -> None:
    first = repo.commit()
    repo.commit()
    root = str(repo.path)
    before = _git_children()
    # These look objects up through git's persistent cat-file processes.
    detect(repo.path, {"PYTEST_MXPERF_COMMIT": first[:8]})
    assert rev_parse(root, first[:7]) == first
    ancestry(root, first)
    assert _git_children() == before
