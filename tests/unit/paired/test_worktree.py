"""Checkouts of another revision in git worktrees, on real (tiny) repositories in tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_mxperf.paired import gitcmd
from pytest_mxperf.paired.gitcmd import WorktreeError, list_worktrees, resolve_rev
from pytest_mxperf.paired.worktree import checkout, default_cache_dir

IDENTITY = {
    "GIT_AUTHOR_NAME": "mxperf test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "mxperf test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(IDENTITY, HOME=str(home))
    return env


def git(path: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=path, env=git_env(path), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


class Repo:
    """A repository with two commits: v.txt is "one" at the first and "two" at HEAD."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        git(path, "init", "-q", "-b", "main")
        (path / ".gitignore").write_text("*.log\n")
        (path / "v.txt").write_text("one\n")
        git(path, "add", ".")
        git(path, "commit", "-q", "-m", "first")
        self.first = git(path, "rev-parse", "HEAD")
        (path / "v.txt").write_text("two\n")
        git(path, "commit", "-q", "-am", "second")
        self.second = git(path, "rev-parse", "HEAD")
        self.env = git_env(path)

    def worktree_lines(self) -> list[str]:
        return git(self.path, "worktree", "list").splitlines()

    def assert_untouched(self) -> None:
        assert (self.path / "v.txt").read_text() == "two\n"
        assert git(self.path, "status", "--porcelain") == ""
        assert git(self.path, "rev-parse", "HEAD") == self.second
        assert git(self.path, "branch", "--show-current") == "main"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_resolve_rev_gives_full_shas(repo: Repo) -> None:
    assert resolve_rev(repo.path, "HEAD~1", repo.env) == repo.first
    assert resolve_rev(repo.path, "main", repo.env) == repo.second
    assert resolve_rev(repo.path, repo.first[:7], repo.env) == repo.first
    git(repo.path, "tag", "-a", "v1", "-m", "tag", repo.first)
    # An annotated tag resolves to its commit, not to the tag object.
    assert resolve_rev(repo.path, "v1", repo.env) == repo.first


@pytest.mark.parametrize("rev", ["nope", "HEAD~5", "-x", "", "0" * 40])
def test_resolve_rev_names_an_unknown_revision(repo: Repo, rev: str) -> None:
    with pytest.raises(WorktreeError, match=f"unknown revision '{rev}'"):
        resolve_rev(repo.path, rev, repo.env)


def test_resolve_rev_outside_a_repository(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    env = {**git_env(tmp_path), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    with pytest.raises(WorktreeError, match="is not in a git repository"):
        resolve_rev(tmp_path / "plain", "HEAD", env)


def test_checkout_gives_the_revisions_files_and_removes_them_after(repo: Repo, cache: Path) -> None:
    with checkout(repo.path, repo.first, cache, env=repo.env) as path:
        assert path == (cache / repo.first[:12]).resolve()
        assert (path / "v.txt").read_text() == "one\n"
        assert git(path, "rev-parse", "HEAD") == repo.first
        assert list_worktrees(repo.path, repo.env) == [path]
        repo.assert_untouched()
    assert not path.exists()
    assert list_worktrees(repo.path, repo.env) == []
    assert len(repo.worktree_lines()) == 1
    repo.assert_untouched()


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_interrupt_inside_the_block_leaves_no_worktree(
    repo: Repo, cache: Path, exc: type[BaseException]
) -> None:
    with pytest.raises(exc), checkout(repo.path, repo.first, cache, env=repo.env) as path:
        assert path.is_dir()
        raise exc
    assert not path.exists()
    assert len(repo.worktree_lines()) == 1, repo.worktree_lines()
    repo.assert_untouched()


def test_interrupt_during_git_worktree_add_leaves_nothing_even_with_keep(
    repo: Repo, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = gitcmd.git

    def interrupted_add(cwd: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        done = real(cwd, *args, **kw)  # type: ignore[arg-type]
        if args[:2] == ("worktree", "add"):
            raise KeyboardInterrupt  # as if Ctrl-C came just as git finished
        return done

    monkeypatch.setattr(gitcmd, "git", interrupted_add)
    with pytest.raises(KeyboardInterrupt), checkout(repo.path, repo.first, cache, keep=True):
        pytest.fail("the body must not run")
    monkeypatch.undo()
    assert not (cache / repo.first[:12]).exists()
    assert len(repo.worktree_lines()) == 1


def test_keep_reuses_a_clean_worktree(repo: Repo, cache: Path) -> None:
    with checkout(repo.path, repo.first, cache, keep=True, env=repo.env) as path:
        (path / "build.log").write_text("ignored files survive reuse")
    assert path.is_dir()
    with checkout(repo.path, repo.first, cache, keep=True, env=repo.env) as again:
        assert again == path
        assert (again / "build.log").exists(), "a clean worktree was rebuilt instead of reused"
    # Reused without keep: removed at the end like a fresh one.
    with checkout(repo.path, repo.first, cache, env=repo.env) as third:
        assert (third / "build.log").exists()
    assert not path.exists()
    assert len(repo.worktree_lines()) == 1


@pytest.mark.parametrize("dirt", ["modified", "untracked"])
def test_a_dirty_cached_worktree_is_replaced(repo: Repo, cache: Path, dirt: str) -> None:
    with checkout(repo.path, repo.first, cache, keep=True, env=repo.env) as path:
        (path / "build.log").write_text("marks this checkout")
        if dirt == "modified":
            (path / "v.txt").write_text("edited by someone\n")
        else:
            (path / "stray.py").write_text("import os\n")
    with checkout(repo.path, repo.first, cache, env=repo.env) as again:
        assert (again / "v.txt").read_text() == "one\n"
        assert not (again / "build.log").exists()
        assert not (again / "stray.py").exists()
    assert len(repo.worktree_lines()) == 1


def test_a_cached_worktree_at_another_commit_is_replaced(repo: Repo, cache: Path) -> None:
    target = cache / repo.first[:12]
    git(repo.path, "worktree", "add", "--detach", str(target), repo.second)
    with checkout(repo.path, repo.first, cache, env=repo.env) as path:
        assert (path / "v.txt").read_text() == "one\n"
    assert len(repo.worktree_lines()) == 1


def test_stale_registration_of_a_killed_run_is_pruned(repo: Repo, cache: Path) -> None:
    # A killed run left a registration whose directory has since gone (temp dir cleaned).
    other = cache / "gone"
    git(repo.path, "worktree", "add", "--detach", str(other), repo.first)
    shutil.rmtree(other)
    # ... and one whose directory is still there, at our target.
    target = cache / repo.first[:12]
    git(repo.path, "worktree", "add", "--detach", str(target), repo.first)
    assert len(repo.worktree_lines()) == 3
    with checkout(repo.path, repo.first, cache, env=repo.env) as path:
        assert path == target.resolve()
        assert len(repo.worktree_lines()) == 2
    assert len(repo.worktree_lines()) == 1


def test_unregistered_leftover_worktree_directory_is_replaced(repo: Repo, cache: Path) -> None:
    target = cache / repo.first[:12]
    git(repo.path, "worktree", "add", "--detach", str(target), repo.first)
    # The registration vanished but the directory stayed.
    shutil.rmtree(repo.path / ".git" / "worktrees")
    with checkout(repo.path, repo.first, cache, env=repo.env) as path:
        assert (path / "v.txt").read_text() == "one\n"
        assert git(path, "rev-parse", "HEAD") == repo.first
    assert not target.exists()


def test_a_directory_that_is_not_ours_is_left_alone(repo: Repo, cache: Path) -> None:
    target = cache / repo.first[:12]
    target.mkdir(parents=True)
    (target / "precious.txt").write_text("not ours")
    with pytest.raises(WorktreeError, match="exists and is not a git worktree"):
        checkout(repo.path, repo.first, cache, env=repo.env).__enter__()
    assert (target / "precious.txt").read_text() == "not ours"


@pytest.mark.parametrize("sha", ["HEAD", "abc123", "G" * 40])
def test_checkout_wants_a_full_sha(repo: Repo, cache: Path, sha: str) -> None:
    with pytest.raises(WorktreeError, match="expected a full commit sha"):
        checkout(repo.path, sha, cache, env=repo.env).__enter__()


def test_checkout_of_a_missing_commit_fails_clearly(repo: Repo, cache: Path) -> None:
    with pytest.raises(WorktreeError, match="worktree add"):
        checkout(repo.path, "1" * 40, cache, env=repo.env).__enter__()
    assert len(repo.worktree_lines()) == 1


def test_the_users_hooks_do_not_run(repo: Repo, cache: Path) -> None:
    hook = repo.path / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {repo.path / 'hook-ran.log'}\n")
    hook.chmod(0o755)
    with checkout(repo.path, repo.first, cache, env=repo.env):
        pass
    assert not (repo.path / "hook-ran.log").exists()


def test_git_location_variables_of_the_caller_are_ignored(repo: Repo, cache: Path) -> None:
    # As inside a git hook: GIT_DIR points elsewhere.
    env = {**repo.env, "GIT_DIR": "/nonexistent", "GIT_INDEX_FILE": "/nonexistent/index"}
    assert resolve_rev(repo.path, "HEAD~1", env) == repo.first
    with checkout(repo.path, repo.first, cache, env=env) as path:
        assert (path / "v.txt").read_text() == "one\n"


def test_default_cache_dir_is_outside_the_repo_and_per_repo(repo: Repo, tmp_path: Path) -> None:
    here = default_cache_dir(repo.path)
    assert repo.path.resolve() not in here.parents
    assert here == default_cache_dir(repo.path)
    assert here.name.startswith("repo-")
    assert here.parent.parent.name.startswith("pytest-mxperf-cache-")
    (tmp_path / "other" / "repo").mkdir(parents=True)
    assert default_cache_dir(tmp_path / "other" / "repo") != here
