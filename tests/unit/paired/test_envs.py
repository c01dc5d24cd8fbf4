"""Per-revision environments with tiny install commands that need no network.

Environments are made ``--without-pip`` (fast); the commands only run Python in them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_mxperf.paired.envs import (
    MARKER,
    EnvBuildError,
    dependency_files,
    ensure_env,
    env_key,
    is_complete,
    venv_environ,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")

SHA = "0123456789abcdef0123456789abcdef01234567"


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def wt(tmp_path: Path) -> Path:
    path = tmp_path / "my worktree"  # a space: arguments must survive substitution
    path.mkdir()
    (path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (path / "requirements.txt").write_text("numpy<1.24\n")
    (path / "README.md").write_text("hello\n")
    return path


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "envs"


def counting_command(tmp_path: Path) -> str:
    """Appends one line per build to a counter file outside the environment."""
    counter = tmp_path / "builds.txt"
    return f"{{python}} -c \"open('{counter}', 'a').write('{{venv}}|{{wt}}\\n')\""


def builds(tmp_path: Path) -> list[str]:
    counter = tmp_path / "builds.txt"
    return counter.read_text().splitlines() if counter.exists() else []


def test_builds_once_and_reuses(wt: Path, cache: Path, tmp_path: Path) -> None:
    cmd = counting_command(tmp_path)
    first = ensure_env(cmd, wt, cache, revision=SHA, with_pip=False)
    assert not first.reused
    assert first.venv.parent == cache.resolve()
    assert first.venv.name.startswith(SHA[:12] + "-")
    assert first.python.exists()
    assert first.python.parent.parent == first.venv
    assert builds(tmp_path) == [f"{first.venv}|{wt.resolve()}"]
    marker = json.loads((first.venv / MARKER).read_text())
    assert marker["revision"] == SHA
    assert marker["dependency_files"] == ["pyproject.toml", "requirements.txt"]

    again = ensure_env(cmd, wt, cache, revision=SHA, with_pip=False)
    assert again.reused
    assert again.python == first.python
    assert len(builds(tmp_path)) == 1


def test_the_documented_example_command(wt: Path, cache: Path) -> None:
    env = ensure_env(
        "{python} -c \"open('{venv}/ok','w')\"", wt, cache, revision=SHA, with_pip=False
    )
    assert (env.venv / "ok").exists()


@pytest.mark.parametrize(
    ("change", "rebuilt"),
    [
        (lambda wt: (wt / "requirements.txt").write_text("numpy<1.23\n"), True),
        (lambda wt: (wt / "pyproject.toml").write_text("[project]\nname = 'other'\n"), True),
        (lambda wt: (wt / "setup.cfg").write_text("[metadata]\n"), True),
        (lambda wt: (wt / "requirements-dev.txt").write_text("ruff\n"), True),
        (lambda wt: (wt / "README.md").write_text("changed\n"), False),
        (lambda wt: (wt / "module.py").write_text("x = 1\n"), False),
    ],
)
def test_dependency_files_decide_the_cache_key(
    wt: Path, cache: Path, tmp_path: Path, change: Callable[[Path], object], rebuilt: bool
) -> None:
    cmd = counting_command(tmp_path)
    first = ensure_env(cmd, wt, cache, revision=SHA, with_pip=False)
    change(wt)
    second = ensure_env(cmd, wt, cache, revision=SHA, with_pip=False)
    assert (second.venv != first.venv) is rebuilt
    assert second.reused is not rebuilt
    assert len(builds(tmp_path)) == (2 if rebuilt else 1)


def test_command_text_and_revision_are_in_the_key(wt: Path) -> None:
    base = env_key("{python} -c pass", wt, SHA, "3.11")
    assert env_key("{python} -c 'pass'", wt, SHA, "3.11") != base
    assert env_key("{python} -c pass", wt, "f" * 40, "3.11") != base
    assert env_key("{python} -c pass", wt, SHA, "3.10") != base
    assert env_key(["{python} -c pass"], wt, SHA, "3.11") == base


def test_dependency_files_found(wt: Path) -> None:
    (wt / "requirements").mkdir()
    (wt / "requirements" / "test.txt").write_text("pytest\n")
    (wt / "setup.py").write_text("")
    assert [p.as_posix() for p in dependency_files(wt)] == [
        "pyproject.toml",
        "requirements.txt",
        "requirements/test.txt",
        "setup.py",
    ]


def test_failed_build_is_a_clear_error_and_leaves_no_environment(
    wt: Path, cache: Path, tmp_path: Path
) -> None:
    cmd = "{python} -c \"import sys; print('resolving mxnet==9.9', flush=True); print('no such version', file=sys.stderr); sys.exit(3)\""
    with pytest.raises(EnvBuildError) as info:
        ensure_env(cmd, wt, cache, revision=SHA, with_pip=False)
    text = str(info.value)
    assert text.startswith(f"building the environment of revision {SHA[:12]}: `")
    assert "exited with code 3" in text
    assert text.endswith("resolving mxnet==9.9\nno such version")
    assert list(cache.iterdir()) == []


def test_a_build_without_its_marker_is_rebuilt(wt: Path, cache: Path, tmp_path: Path) -> None:
    cmd = counting_command(tmp_path)
    first = ensure_env(cmd, wt, cache, revision=SHA, with_pip=False)
    # As if the build had been killed just before the marker was written.
    (first.venv / MARKER).unlink()
    (first.venv / "half-installed").write_text("")
    assert not is_complete(first.venv)
    second = ensure_env(cmd, wt, cache, revision=SHA, with_pip=False)
    assert not second.reused
    assert second.venv == first.venv
    assert not (second.venv / "half-installed").exists()
    assert len(builds(tmp_path)) == 2


def test_a_build_that_hangs_is_killed_at_the_timeout(wt: Path, cache: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    cmd = (
        f"{{python}} -c \"import os, time; open('{pid_file}', 'w').write(str(os.getpid())); "
        'time.sleep(120)"'
    )
    with pytest.raises(EnvBuildError, match="was killed: the build took more than 2 s"):
        ensure_env(cmd, wt, cache, revision=SHA, with_pip=False, timeout=2)
    assert not running(int(pid_file.read_text()))
    assert list(cache.iterdir()) == []


def test_several_commands_run_in_order(wt: Path, cache: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    cmds = [f"{{python}} -c \"open('{log}', 'a').write('{i}')\"" for i in range(3)]
    ensure_env(cmds, wt, cache, revision=SHA, with_pip=False)
    assert log.read_text() == "012"


def test_commands_run_in_the_worktree_inside_the_new_environment(
    wt: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    out = tmp_path / "seen.json"
    script = tmp_path / "probe.py"
    script.write_text(
        "import json, os, sys\n"
        f"json.dump({{'cwd': os.getcwd(), 'prefix': sys.prefix, 'pythonpath': os.environ.get('PYTHONPATH'),"
        f" 'virtual_env': os.environ.get('VIRTUAL_ENV')}}, open({str(out)!r}, 'w'))\n"
    )
    env = ensure_env(f"{{python}} {script}", wt, cache, revision=SHA, with_pip=False)
    seen = json.loads(out.read_text())
    assert seen["cwd"] == str(wt.resolve())
    assert seen["prefix"] == str(env.venv)
    assert seen["pythonpath"] is None
    assert seen["virtual_env"] == str(env.venv)


def test_a_missing_program_is_a_clear_error(wt: Path, cache: Path) -> None:
    with pytest.raises(EnvBuildError, match="`no-such-program-xyz --flag` could not start"):
        ensure_env("no-such-program-xyz --flag", wt, cache, revision=SHA, with_pip=False)
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize("cmd", ["", "   ", []])
def test_an_empty_command_is_refused(wt: Path, cache: Path, cmd: str | list[str]) -> None:
    with pytest.raises(ValueError, match="empty install command"):
        ensure_env(cmd, wt, cache, revision=SHA, with_pip=False)


def test_venv_environ() -> None:
    base = {"PATH": "/usr/bin", "PYTHONPATH": "/x", "VIRTUAL_ENV": "/old", "HOME": "/h"}
    env = venv_environ(Path("/cache/env"), base)
    assert env == {"PATH": "/cache/env/bin:/usr/bin", "VIRTUAL_ENV": "/cache/env", "HOME": "/h"}
    assert base["PYTHONPATH"] == "/x"  # not modified
