"""The stand-ins of the ``uses:`` steps of the example workflows (see `workflow_steps`):
checkout, setup-python, upload/download-artifact; and the outputs files GitHub's steps write."""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from pytest_mxperf.testing.repos import GIT_ENV

#: setup-python's interpreter: this one, whose ``-m venv DIR`` makes a venv of shims to it and
#: whose ``-m pip install -r FILE`` checks that FILE pins pytest-mxperf and installs nothing (as
#: does ``-m pip install "pytest-mxperf[EXTRA]==VERSION"``, an extra of the plugin already
#: installed; an extra without a pinned version is not stood in for).
_PYTHON_SHIM = """#!/usr/bin/env bash
# setup-python's interpreter in the test harness (pytest_mxperf.testing.workflow_steps).
real={real}
if [ "$1" = -m ] && [ "$2" = venv ]; then
  for arg in "${{@:3}}"; do case "$arg" in -*) ;; *) dir=$arg ;; esac; done
  mkdir -p "$dir/bin"
  cp "$0" "$dir/bin/python" && cp "$0" "$dir/bin/python3"
  printf '#!/usr/bin/env bash\\nexec %q -m pytest "$@"\\n' "$real" > "$dir/bin/pytest"
  printf '#!/usr/bin/env bash\\nexec %q -c %q "$@"\\n' "$real" \\
    'import sys; from pytest_mxperf.cli import main; sys.exit(main())' > "$dir/bin/mxperf"
  chmod +x "$dir/bin/pytest" "$dir/bin/mxperf"
  exit 0
fi
if [ "$1" = -m ] && [ "$2" = pip ] && [ "$3" = install ]; then
  req=""
  extra=""
  prev=""
  for arg in "$@"; do
    [ "$prev" = -r ] && req=$arg
    case "$arg" in pytest-mxperf\\[*\\]==*) extra=$arg ;; esac
    prev=$arg
  done
  if [ -z "$req" ] && [ -n "$extra" ]; then
    echo "harness: pip install $extra stood in for (the plugin and its extras are importable here)"
    exit 0
  fi
  grep -Eq '^pytest-mxperf(\\[[a-z0-9,]+\\])?(==| @ )' "$req" || {{
    echo "harness: $req does not pin pytest-mxperf"; exit 1; }}
  echo "harness: pip install -r $req stood in for (the plugin is importable here)"
  exit 0
fi
exec "$real" "$@"
"""


class StandIn(Exception):
    """A stood-in action failed (as the action would: the step fails)."""


def read_outputs(path: Path) -> dict[str, str]:
    """``name=value`` lines and ``name<<DELIMITER`` blocks of an outputs or env file."""
    found: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            block = []
            for more in lines:
                if more == delimiter:
                    break
                block.append(more)
            found[key] = "\n".join(block)
        elif "=" in line:
            key, value = line.split("=", 1)
            found[key] = value
    return found


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise StandIn(f"git {shlex.join(args)}: {done.stderr.strip()}")
    return done.stdout


#: Where actions/checkout keeps the token when ``persist-credentials`` is true (its default).
EXTRAHEADER = "http.https://github.com/.extraheader"


def checkout(origin: Path, ws: Path, sha: str, token: str = "", persist: bool = True) -> str:
    """The clone at ``sha`` with every branch and PR head (fetch-depth: 0); with ``persist``
    (``persist-credentials``, true by default) and a token, the token in the clone's git config
    as actions/checkout leaves it (an extraheader), for the tests to find where it should not
    be."""
    if ws.exists():
        shutil.rmtree(ws)
    _git(ws.parent, "clone", "--quiet", str(origin), str(ws))
    _git(ws, "fetch", "--quiet", "origin", "+refs/pull/*/head:refs/remotes/origin/pr/*")
    _git(ws, "checkout", "--quiet", "--detach", sha)
    if persist and token:
        auth = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        _git(ws, "config", "--local", EXTRAHEADER, f"AUTHORIZATION: basic {auth}")
    return f"checked out {sha[:10]}"


def setup_python(toolcache: Path) -> Path:
    """A bin folder whose ``python`` is this interpreter (see `_PYTHON_SHIM`)."""
    bin_dir = toolcache / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir(parents=True)
        shim = _PYTHON_SHIM.format(real=shlex.quote(sys.executable))
        for name in ("python", "python3"):
            (bin_dir / name).write_text(shim)
            (bin_dir / name).chmod(0o755)
    return bin_dir


def upload(store: Path, ws: Path, inputs: Mapping[str, str]) -> str:
    target = store / inputs["name"]
    if target.exists():
        raise StandIn(f"an artifact named {inputs['name']} exists in this run")
    paths = [p.strip() for p in inputs["path"].splitlines() if p.strip()]
    found = [ws / p for p in paths if (ws / p).exists()]
    if not found:
        if inputs.get("if-no-files-found", "warn") == "error":
            raise StandIn(f"no files for artifact {inputs['name']}")
        return f"warning: no files found for artifact {inputs['name']}"
    target.mkdir(parents=True)
    for path in found:
        if path.is_dir() and len(found) == 1:
            shutil.copytree(path, target, dirs_exist_ok=True)
        elif path.is_dir():
            shutil.copytree(path, target / path.name)
        else:
            shutil.copy2(path, target / path.name)
    return f"uploaded {inputs['name']}: {sorted(p.name for p in target.iterdir())}"


def download(store: Path, ws: Path, inputs: Mapping[str, str], run_id: int) -> str:
    source_run = inputs.get("run-id") or str(run_id)
    if source_run != str(run_id) and not inputs.get("github-token"):
        raise StandIn("download-artifact: another run's artifact needs github-token")
    source = store / source_run / inputs["name"]
    if not source.is_dir():
        raise StandIn(f"Unable to download artifact(s): {inputs['name']} of run {source_run}")
    target = ws / inputs.get("path", ".")
    shutil.copytree(source, target, dirs_exist_ok=True)
    return f"downloaded {inputs['name']} of run {source_run}"
