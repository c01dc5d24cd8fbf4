"""Per-revision Python environments for paired runs, built once and cached (like asv's).

A revision may need other dependencies than the working tree (another MXNet, another numpy).
:func:`ensure_env` builds a virtual environment for a revision's worktree with the user's install
command and returns its interpreter, reusing it on later runs while nothing that shapes it has
changed.

Install command placeholders, replaced in each argument after splitting the command with
shell rules (so paths with spaces stay one argument; there is no shell, hence no ``&&``: give
several commands instead):

- ``{python}``: the new environment's interpreter;
- ``{wt}``: the revision's worktree (its source tree);
- ``{venv}``: the new environment's directory.

Example: ``{python} -m pip install -e {wt} mxnet==1.8.0.post0 "numpy<1.24"``.

Whatever the command installs, the side runs this plugin in the environment (from its own
source, put first on ``sys.path``), so its own requirements (:func:`plugin_requirements`:
pytest, numpy, tabulate, GitPython, never an extra) are installed after the command, by
``{python} -m pip install``; pip leaves those already satisfied alone.

The cache key is the revision, a hash of the dependency files found in the worktree
(:data:`DEPENDENCY_PATTERNS`), the command text, the plugin's requirements, the worktree path
(an editable install points there) and the base interpreter's version. A marker file written
last says an environment is complete: one whose build was killed has none and is rebuilt,
never used half-made. Two processes building the same environment at once are not
coordinated: one controller per cache root.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_mxperf.system import files
from pytest_mxperf.system.procgroup import run_bounded

#: Files whose content decides what an install command installs (top level of the worktree).
DEPENDENCY_PATTERNS: tuple[str, ...] = (
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "requirements*.txt",
    "requirements/*.txt",
)
#: Written last into a complete environment.
MARKER = ".mxperf-env-complete.json"
#: Default bound of a whole build, in seconds (MXNet wheels are large).
BUILD_TIMEOUT = 1800.0

# Variables of this process that must not leak into another environment's interpreter:
# PYTHONPATH would make pip see (and skip) packages of *this* environment.
_LEAKY_VARS = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_USER", "__PYVENV_LAUNCHER__")


class EnvBuildError(Exception):
    """An environment could not be built; the message names the command and shows its output."""


@dataclass(frozen=True)
class RevisionEnv:
    """A complete environment for one revision.

    :param python: its interpreter, to run the revision's side with.
    :param venv: its directory.
    :param key: the cache key (directory name).
    :param reused: True when found complete in the cache, False when built now.
    """

    python: Path
    venv: Path
    key: str
    reused: bool

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) adjusted to run in this environment."""
        return venv_environ(self.venv, base)


def venv_environ(venv: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for processes of ``venv``: its scripts first on PATH, no leaky variables."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if k not in _LEAKY_VARS}
    env["VIRTUAL_ENV"] = str(venv)
    bindir = str(_bin_dir(venv))
    env["PATH"] = bindir + os.pathsep + env["PATH"] if env.get("PATH") else bindir
    return env


def _bin_dir(venv: Path) -> Path:
    return venv / ("Scripts" if sys.platform == "win32" else "bin")


def venv_python(venv: Path) -> Path:
    """The interpreter of a virtual environment directory."""
    return _bin_dir(venv) / ("python.exe" if sys.platform == "win32" else "python")


#: The distribution whose requirements every side's environment needs (the plugin's).
DISTRIBUTION = "pytest-mxperf"


def plugin_requirements(distribution: str = DISTRIBUTION) -> list[str]:
    """The requirements of the installed plugin without its extras (MXNet is the user's
    choice), as its metadata lists them (``tabulate<0.11,>=0.9``); [] when the plugin runs
    from a source tree that is not installed."""
    try:
        found = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [r.strip() for r in found if "extra" not in r.partition(";")[2]]


def dependency_files(worktree: str | Path) -> list[Path]:
    """Dependency files of the worktree (:data:`DEPENDENCY_PATTERNS`), sorted, relative."""
    root = Path(worktree)
    found = {p.relative_to(root) for pat in DEPENDENCY_PATTERNS for p in root.glob(pat)}
    return sorted((p for p in found if (root / p).is_file()), key=lambda p: p.as_posix())


def _commands(install_command: str | Sequence[str]) -> list[str]:
    commands = [install_command] if isinstance(install_command, str) else list(install_command)
    if not commands or any(not shlex.split(c) for c in commands):
        raise ValueError(f"empty install command: {install_command!r}")
    return commands


def env_key(
    install_command: str | Sequence[str],
    worktree: str | Path,
    revision: str,
    base_python_version: str,
    requirements: Sequence[str] = (),
) -> str:
    """The cache key ``<revision[:12]>-<digest>`` of an environment (see the module docstring)."""
    root = Path(worktree).resolve()
    digest = hashlib.sha256()
    parts: list[object] = [_commands(install_command), str(root), base_python_version]
    if requirements:  # (keys of environments built without them stay as they were)
        parts.append(list(requirements))
    digest.update(json.dumps(parts).encode())
    for rel in dependency_files(root):
        digest.update(f"\0{rel.as_posix()}\0".encode())
        digest.update(hashlib.sha256((root / rel).read_bytes()).digest())
    label = "".join(c for c in revision[:12] if c.isalnum() or c in "-_.") or "rev"
    return f"{label}-{digest.hexdigest()[:16]}"


def _python_version(python: str | Path) -> str:
    try:
        done = subprocess.run(
            [str(python), "-c", "import sys; print(sys.version)"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvBuildError(f"cannot run the base interpreter {python}: {exc}") from None
    if done.returncode != 0:
        raise EnvBuildError(f"cannot run the base interpreter {python}: {done.stderr.strip()}")
    return done.stdout.strip()


def is_complete(venv: Path) -> bool:
    """True when ``venv`` holds a finished build (its marker and its interpreter exist)."""
    return (venv / MARKER).is_file() and venv_python(venv).exists()


def _substitute(command: str, python: Path, worktree: Path, venv: Path) -> list[str]:
    values = {"{python}": str(python), "{wt}": str(worktree), "{venv}": str(venv)}
    argv = []
    for arg in shlex.split(command):
        for placeholder, value in values.items():
            arg = arg.replace(placeholder, value)
        argv.append(arg)
    return argv


def ensure_env(
    install_command: str | Sequence[str],
    worktree: str | Path,
    cache_root: str | Path,
    *,
    revision: str,
    timeout: float = BUILD_TIMEOUT,
    base_python: str | Path = sys.executable,
    with_pip: bool = True,
    on_tick: Callable[[float], None] | None = None,
    requirements: Sequence[str] = (),
    on_build: Callable[[], None] | None = None,
) -> RevisionEnv:
    """The environment of ``revision`` under ``cache_root``: reused if complete, else built.

    Building runs ``<base_python> -m venv`` and then each install command in the worktree, all
    within ``timeout`` seconds in total, each in its own process group (killed with its children
    on timeout or KeyboardInterrupt). On failure the half-made environment is deleted.

    :param install_command: one command, or several run in order; placeholders in the module
        docstring.
    :param revision: the revision's sha (names the environment; part of the key).
    :param with_pip: seed pip into the environment (``python -m venv`` default); False builds
        faster when the command does not need pip.
    :param on_tick: called every few seconds with the seconds the current step has run.
    :param requirements: installed after the commands (``{python} -m pip install``), e.g.
        `plugin_requirements`: what the side needs to run the plugin, whatever the command
        installed.
    :param on_build: called once when a build starts (not for an environment reused).
    :raises EnvBuildError: a step failed or timed out; the message has the output's tail.
    """
    commands = _commands(install_command)
    wt = Path(worktree).resolve()
    root = Path(cache_root).resolve()
    key = env_key(commands, wt, revision, _python_version(base_python), requirements)
    venv = root / key
    python = venv_python(venv)
    if is_complete(venv):
        return RevisionEnv(python, venv, key, reused=True)
    if on_build is not None:
        on_build()

    # Leftover of a killed or failed build: never use it, start again.
    if venv.exists():
        shutil.rmtree(venv)
    root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    venv_step = [str(base_python), "-m", "venv", *([] if with_pip else ["--without-pip"])]
    steps = [[*venv_step, str(venv)], *(_substitute(c, python, wt, venv) for c in commands)]
    steps += [[str(python), "-m", "pip", "install", "-q", *requirements]] if requirements else []
    build_env = venv_environ(venv)
    try:
        for argv in steps:
            _run_step(argv, wt, build_env, deadline, timeout, revision, on_tick)
        _write_marker(venv, key, revision, commands, wt)
    except BaseException:
        # Also on KeyboardInterrupt: no half-made environment stays behind.
        shutil.rmtree(venv, ignore_errors=True)
        raise
    return RevisionEnv(python, venv, key, reused=False)


def _run_step(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    deadline: float,
    timeout: float,
    revision: str,
    on_tick: Callable[[float], None] | None,
) -> None:
    shown = shlex.join(argv)
    what = f"building the environment of revision {revision[:12]}: `{shown}`"
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise EnvBuildError(f"{what} not started: the build took more than {timeout:g} s")
    try:
        done = run_bounded(argv, cwd=cwd, env=env, timeout=remaining, poll=2.0, on_tick=on_tick)
    except OSError as exc:  # the program does not exist or cannot run
        raise EnvBuildError(f"{what} could not start: {exc}") from None
    if done.timed_out:
        raise EnvBuildError(
            f"{what} was killed: the build took more than {timeout:g} s\n{done.tail}"
        )
    if done.returncode != 0:
        raise EnvBuildError(f"{what} {done.describe(timeout)}\n{done.tail}")


def _write_marker(venv: Path, key: str, revision: str, commands: list[str], wt: Path) -> None:
    info = {
        "key": key,
        "revision": revision,
        "commands": commands,
        "worktree": str(wt),
        "dependency_files": [p.as_posix() for p in dependency_files(wt)],
        "built": _dt.datetime.now(_dt.timezone.utc).isoformat(),
    }
    files.write_json_atomic(venv / MARKER, info, indent=1)  # the marker is whole or absent


def _took(start: float) -> str:
    seconds = time.monotonic() - start
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def ensure_env_told(
    command: str, tree: Path, cache: Path, revision: str, tell: Callable[[str], None]
) -> RevisionEnv:
    """`ensure_env` for a paired side of ``revision`` (this plugin's own requirements installed
    after ``command``), saying on the terminal (``tell``) when a build starts and how long it
    took, or that it failed (MXNet's wheels take minutes).

    :raises EnvBuildError: as `ensure_env`.
    """
    started: list[float] = []
    what = f"the environment of revision {revision[:10]}"

    def building() -> None:
        started.append(time.monotonic())
        tell(f"mxperf: building {what} ({command!r}; MXNet's wheels take minutes)")

    try:
        env = ensure_env(
            command,
            tree,
            cache,
            revision=revision,
            requirements=plugin_requirements(),
            on_build=building,
        )
    except EnvBuildError:
        if started:
            tell(f"mxperf: {what} failed to build ({_took(started[0])})")
        raise
    if started:
        tell(f"mxperf: {what} built in {_took(started[0])}")
    return env
