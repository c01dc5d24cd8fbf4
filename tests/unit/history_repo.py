"""A scratch git repository of stored baselines for the history page's tests (history, page,
browser): a first-parent line with a regression and an improvement, a merged side branch, and
this repository's own stored baselines; and a parser of the page's plots."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from pytest_mxperf.baselines import store as baselines
from pytest_mxperf.config.floors import Floor
from pytest_mxperf.testing.repos import GIT_ENV, git

REPO_BASELINES = Path(__file__).resolve().parents[2] / "baselines"


def repo_points() -> Counter[tuple[str, str]]:
    """How many of this repository's stored files hold each (hardware, case key)."""
    files = REPO_BASELINES.rglob("*.json")
    return Counter((path.parent.name, key) for path in files for key in baselines.load(path).cases)


HW = "cpu-test-xeon-4c"
R18 = "resnet18_v1-64px/inference/float32/bs8/cpu"
MOB = "mobilenet0.25-64px/training/float32/bs1/cpu"

# (message, images/sec of R18, of MOB); runs spread ±1% around the figure.
MAIN_LINE = [
    ("Add the suite", 100.0, 40.0),
    ("Refactor the data loader", 101.0, 40.4),
    ("Use a slower convolution layout", 74.0, 40.2),  # R18 regresses by 27%
    ("Tidy imports", 75.0, 39.8),
    ("Restore the layout", 96.0, 40.1),  # R18 improves by 28%
]


def _case(key: str, rate: float) -> dict[str, Any]:
    model, mode, dtype, bs, device = key.split("/")
    return {
        "images_per_sec": rate,
        "rel_iqr": 0.02,
        "iqr": rate * 0.02,
        "model": model,
        "mode": mode,
        "dtype": dtype,
        "batch_size": int(bs[2:]),
        "device_kind": device,
        "status": "ok",
    }


def _store(root: Path, sha: str, date: str, r18: float, mob: float) -> None:
    commit = {"sha": sha, "date": date, "branch": "main", "dirty": False, "source": "git"}
    # Three updates at one commit: store() keeps the run medians, as --mxperf-update does.
    for factor in (0.99, 1.01, 1.0):
        baselines.store(
            root, HW, commit, {R18: _case(R18, r18 * factor), MOB: _case(MOB, mob * factor)}
        )


def _git_at(repo: Path, date: str, *args: str) -> None:
    """git with fixed author/committer dates, so the page's x axis is known."""
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _commit(repo: Path, message: str, day: int) -> str:
    (repo / "model.py").write_text(f"# {message}\n")
    git(repo, "add", "model.py")
    _git_at(repo, f"2025-03-{day:02d}T12:00:00+01:00", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_scratch(tmp_path: Path) -> dict[str, Any]:
    """A repository whose first-parent line has six commits with baselines, a merged side-branch
    commit with a baseline (off the line), and this repository's stored baselines (unknown to
    the scratch repository)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    root = repo / "baselines"
    shas = []
    for day, (message, r18, mob) in enumerate(MAIN_LINE, 1):
        sha = _commit(repo, message, day)
        _store(root, sha, f"2025-03-{day:02d}T11:00:00+00:00", r18, mob)
        shas.append(sha)
    git(repo, "checkout", "-q", "-b", "side")
    side = _commit(repo, "Experiment on a side branch", 6)
    _store(root, side, "2025-03-06T11:00:00+00:00", 60.0, 41.0)
    git(repo, "checkout", "-q", "main")
    _git_at(repo, "2025-03-07T12:00:00+01:00", "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    merge = git(repo, "rev-parse", "HEAD")
    _store(root, merge, "2025-03-07T11:00:00+00:00", 97.0, 40.3)
    shas.append(merge)
    for path in REPO_BASELINES.rglob("*.json"):
        dest = root / path.relative_to(REPO_BASELINES)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest)
    floors = [Floor("resnet18_v1-64px", 8, 70.0, hardware="cpu-test-*", mode="inference")]
    return {"repo": repo, "root": root, "line": shas, "side": side, "floors": floors}


class Plots(HTMLParser):
    """Collects, per ``div.case`` of the page, its data attributes and the plotly point paths
    rendered inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.cases: dict[tuple[str, str], dict[str, Any]] = {}
        self._current: tuple[str, str] | None = None
        self._depth = 0
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        external = a.get("href") if tag == "link" else a.get("src")
        if external:
            self.external.append(f"<{tag} {a}>")
        if tag == "div" and a.get("data-case") and self._current is None:
            self._current = (str(a["data-hardware"]), str(a["data-case"]))
            self.cases[self._current] = {
                "attrs": a,
                "points": 0,
                "svg": 0,
                "errorbars": 0,
                "text": [],
            }
            self.cases[self._current]["hidden"] = "none" in (a.get("style") or "")
            self._depth = 1
            return
        if self._current is None:
            return
        if tag == "div":
            self._depth += 1
        classes = (a.get("class") or "").split()
        if tag == "path" and "point" in classes:
            self.cases[self._current]["points"] += 1
        if tag == "svg" and "main-svg" in classes:
            self.cases[self._current]["svg"] += 1
        if tag == "g" and classes == ["errorbar"]:
            self.cases[self._current]["errorbars"] += 1

    def handle_data(self, data: str) -> None:
        if self._current is not None and data.strip():
            self.cases[self._current]["text"].append(data.strip())

    def handle_endtag(self, tag: str) -> None:
        if self._current is not None and tag == "div":
            self._depth -= 1
            if self._depth == 0:
                self._current = None
