"""`procs.end_on_sigterm`: a script's SIGTERM ends the process it waits on, and every script
that runs pytest (or anything long) in a subprocess installs it."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import time
from pathlib import Path

from pytest_mxperf.system.procgroup import signal_group
from pytest_mxperf.testing.procs import descendants, gone

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"

#: A script's shape: waits on a long child, as aa_check.py waits on its pytest runs.
WAITER = """
import subprocess, sys
from pytest_mxperf.testing.procs import end_on_sigterm
if sys.argv[1] == "on":
    end_on_sigterm()
subprocess.run([sys.executable, "-c", "import time; time.sleep(60)"], capture_output=True)
"""


def _sigterm_leaves(mode: str, within: float) -> tuple[int, bool]:
    """Start the waiter, SIGTERM it once its child runs: its exit status, and whether that
    child was gone ``within`` seconds after it."""
    waiter = subprocess.Popen([sys.executable, "-c", WAITER, mode], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (kids := descendants(waiter.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert kids, "the waiter started no child"
        # Let the waiter get from starting its child to waiting on it: a signal while Popen is
        # still starting it would end the waiter before `subprocess.run` could kill the child.
        time.sleep(0.2)
        waiter.send_signal(signal.SIGTERM)
        status = waiter.wait(timeout=30)
        return status, gone(kids, within=within)
    finally:
        # The waiter's group (its own session) holds its child even once the waiter is gone:
        # the child it left running ("off") dies here, not 60 s later.
        signal_group(waiter.pid, signal.SIGKILL)
        if waiter.poll() is None:
            waiter.wait()


def test_a_sigterm_ends_the_script_and_the_process_it_waits_on() -> None:
    status, child_gone = _sigterm_leaves("on", within=10)
    assert status != 0
    assert child_gone


def test_without_it_the_child_outlives_the_script() -> None:
    """The default the helper fixes (and what makes the test above able to fail)."""
    status, child_gone = _sigterm_leaves("off", within=1)  # its child sleeps 60 s
    assert status == -signal.SIGTERM
    assert not child_gone


def test_every_script_that_starts_processes_installs_it_in_its_main_block() -> None:
    starting = [p for p in sorted(SCRIPTS.glob("*.py")) if "subprocess" in p.read_text()]
    assert starting
    missing = []
    for script in starting:
        tree = ast.parse(script.read_text())
        mains = [
            node
            for node in tree.body
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        ]
        calls = {ast.unparse(n.func) for m in mains for n in ast.walk(m) if isinstance(n, ast.Call)}
        if "end_on_sigterm" not in calls:
            missing.append(script.name)
    assert not missing, f"these scripts do not call end_on_sigterm() under __main__: {missing}"
