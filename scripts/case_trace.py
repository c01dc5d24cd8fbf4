"""Print the per-case counts of issue 47 that only a run can give, traced with ``sys.setprofile``
over the fake back end: one plain case, and one case paired with ``--mxperf-ab HEAD~1``.

    python scripts/case_trace.py             # the counts, one a line per run and process role
    python scripts/case_trace.py --verbose   # and the modules and re-entries they are made of

Each run is a scratch git repository holding one fake-back-end case (`FakeModel`, 500 img/s);
its conftest installs the tracer (this file, imported from ``scripts/``) in every pytest process
of the run: the controller and, in the paired run, each side (forked from the fork server, so
the sides' traces are summed). A process's window opens at the first call of the fixture's
``mxperf.inference`` and closes when the table is rendered (`reporting.tables.render_table`
returns) or the process ends; counted in that window, for calls made from the package:

- ``decide()``: calls of `judging.decisions.decide` (and, apart, of its ``decide_*`` siblings);
- ``replace()``: calls of `dataclasses.replace`;
- a `CaseResult` to plain data and back: calls of its ``as_dict``/``from_dict`` methods, or of
  the one codec's ``to_dict``/``from_dict`` with a `CaseResult` (the way the case's record is
  converted, whichever of the two the code at hand has);
- modules and wings of ``pytest_mxperf`` that ran code;
- re-entries ("returns to a module already left"): a call into a package module that already
  has a frame lower on the stack, from another module (``stored`` calling back into ``path``;
  ``runner`` calling a closure of ``stored``). Given as events and as distinct
  (caller module -> module.function) sites.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from pytest_mxperf.testing.procs import end_on_sigterm

ROOT = Path(__file__).resolve().parent.parent
#: A package file's path holds this (a side imports the package through a link of that name).
PACKAGE = os.sep + "pytest_mxperf" + os.sep
OUT_ENV = "MXPERF_CASE_TRACE_OUT"

CONFTEST = f"""
import sys
sys.path.insert(0, {str(ROOT / "scripts")!r})
import case_trace
import pytest
from pytest_mxperf.testing import FakeBackend

case_trace.install()

@pytest.fixture(scope="session")
def mxperf_backend():
    return FakeBackend()

def pytest_sessionstart(session):
    case_trace.note_role(session.config)

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    case_trace.write()
"""

SUITE = """
from pytest_mxperf.testing import FakeModel

def test_toy(mxperf):
    mxperf.inference(FakeModel({speed}), batch_size=8, model="toy")
"""


class Tracer:
    """The counts of one process, gathered while its window is open."""

    def __init__(self) -> None:
        self.role = "controller"
        self.active = False
        self.closed = False
        self.end_frame: FrameType | None = None
        self.modules: set[str] = set()
        self.calls: Counter[str] = Counter()
        self.reentries: Counter[str] = Counter()
        self._names: dict[str, str | None] = {}

    def module(self, filename: str) -> str | None:
        if filename not in self._names:
            name = None
            if PACKAGE in filename and "site-packages" not in filename.split(PACKAGE)[-1]:
                rel = Path(filename.rsplit(PACKAGE, 1)[1]).with_suffix("")
                parts = [p for p in rel.parts if p != "__init__"]
                name = ".".join(["pytest_mxperf", *parts])
            self._names[filename] = name
        return self._names[filename]

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "return":
            if frame is self.end_frame:
                self.active, self.closed = False, True
            return
        if event != "call":
            return
        code = frame.f_code
        if code.co_name in ("as_dict", "to_dict", "from_dict"):
            self.conversion(frame, code.co_name)
        if self.closed:
            return
        mod = self.module(code.co_filename)
        if not self.active:
            if mod == "pytest_mxperf.case.fixture" and code.co_name == "inference":
                self.active = True
            else:
                return
        caller = frame.f_back
        caller_mod = None if caller is None else self.module(caller.f_code.co_filename)
        if mod is None:
            if (
                caller_mod
                and code.co_name == "replace"
                and code.co_filename.endswith("dataclasses.py")
            ):
                self.calls["replace()"] += 1
            return
        self.modules.add(mod)
        if mod == "pytest_mxperf.judging.decisions" and code.co_name.startswith("decide"):
            self.calls[f"{code.co_name}()"] += 1
        if mod == "pytest_mxperf.reporting.tables" and code.co_name == "render_table":
            self.end_frame = frame
        if caller_mod is None or caller_mod == mod:
            return
        below = caller.f_back if caller is not None else None
        while below is not None:
            if self.module(below.f_code.co_filename) == mod:
                self.reentries[f"{caller_mod} -> {mod}.{code.co_name}"] += 1
                break
            below = below.f_back

    def conversion(self, frame: FrameType, name: str) -> None:
        """A `CaseResult` converted to or from plain data (in the window, and in the whole
        process: a paired run's controller reads the sides' files before its first test)."""
        if self.module(frame.f_code.co_filename) is None:
            return
        local = frame.f_locals
        what = local.get("self", local.get("record", local.get("cls")))
        kind = what if isinstance(what, type) else type(what)
        if kind.__name__ != "CaseResult":
            return
        way = "from_dict" if name == "from_dict" else "to_dict"
        self.calls[f"{way} (process)"] += 1
        if self.active:
            self.calls[way] += 1

    def summary(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "calls": dict(self.calls),
            "modules": sorted(self.modules),
            "reentries": dict(self.reentries),
        }


TRACER = Tracer()


def install() -> None:
    """Trace this process (called by the scratch project's conftest)."""
    if os.environ.get(OUT_ENV):
        sys.setprofile(TRACER)


def note_role(config: Any) -> None:
    if config.pluginmanager.get_plugin("mxperf-side") is not None:
        TRACER.role = "side"


def write() -> None:
    out = os.environ.get(OUT_ENV)
    if not out:
        return
    sys.setprofile(None)
    path = Path(out) / f"{TRACER.role}-{os.getpid()}.json"
    path.write_text(json.dumps(TRACER.summary()), encoding="utf-8")


def git(path: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)


def run(project: Path, paired: bool) -> list[dict[str, Any]]:
    """One run of the scratch project: the summaries its processes wrote."""
    traces = project / "traces"
    traces.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_MXPERF_")}
    env.pop("PYTEST_ADDOPTS", None)
    # Machine-wide locks of its own (under its TMPDIR): a fake case never waits for a real
    # benchmark on this machine, nor holds one up (as the suite's fake_pytester does).
    own_tmp = project.parent / "tmp"
    own_tmp.mkdir()
    env.update({OUT_ENV: str(traces), "PYTEST_MXPERF_SIDE_PRELOAD": "", "TMPDIR": str(own_tmp)})
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mxperf"]
    args += ["--mxperf-ab", "HEAD~1"] if paired else []
    done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the traced run failed:\n{done.stdout}\n{done.stderr}")
    return [json.loads(p.read_text()) for p in sorted(traces.glob("*.json"))]


def project(root: Path) -> Path:
    path = root / "project"
    path.mkdir(parents=True)
    (path / "conftest.py").write_text(CONFTEST)
    (path / "test_toy.py").write_text(SUITE.format(speed=500.0))
    (path / ".gitignore").write_text("__pycache__/\ntraces/\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    for message in ("base", "head"):
        git(
            path,
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            message,
        )
    return path


def report(label: str, traces: list[dict[str, Any]], verbose: bool) -> None:
    for role in ("controller", "side"):
        mine = [t for t in traces if t["role"] == role]
        if not mine:
            continue
        calls: Counter[str] = Counter()
        reentries: Counter[str] = Counter()
        modules: set[str] = set()
        for t in mine:
            calls.update(t["calls"])
            reentries.update(t["reentries"])
            modules.update(t["modules"])
        wings = {m.split(".")[1] for m in modules if m.count(".") >= 1}
        who = f"{label}, {role}" + (f" ({len(mine)} processes)" if len(mine) > 1 else "")
        rows = [
            ("decide() calls", calls["decide()"]),
            (
                "decide_*() calls (paired, arbitrated, same-code decisions)",
                sum(n for name, n in calls.items() if name.startswith("decide_")),
            ),
            ("dataclasses.replace calls", calls["replace()"]),
            ("CaseResult to dict (as_dict or codec.to_dict)", calls["to_dict"]),
            ("CaseResult from dict (from_dict or codec.from_dict)", calls["from_dict"]),
            ("CaseResult to dict, whole process", calls["to_dict (process)"]),
            ("CaseResult from dict, whole process", calls["from_dict (process)"]),
            ("modules on the way", len(modules)),
            ("wings on the way", len(wings)),
            ("re-entries into a module already left (events)", sum(reentries.values())),
            ("re-entries into a module already left (sites)", len(reentries)),
        ]
        for name, count in rows:
            print(f"{count:6d}  {who}: {name}")
        if verbose:
            for m in sorted(modules):
                print(f"          module {m}")
            for site, n in sorted(reentries.items()):
                print(f"          re-entry {site} x{n}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="list modules and re-entries")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = project(Path(tmp) / "plain")
        report("plain case", run(plain, paired=False), args.verbose)
    with tempfile.TemporaryDirectory() as tmp:
        paired = project(Path(tmp) / "paired")
        report("paired case", run(paired, paired=True), args.verbose)
    return 0


if __name__ == "__main__":
    end_on_sigterm()  # a SIGTERM ends the pytest run it waits on too
    raise SystemExit(main())
