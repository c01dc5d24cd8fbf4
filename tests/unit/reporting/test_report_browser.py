"""The history page loaded in a real headless browser, where Debian's chromium is installed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from history_repo import HW, MOB, R18, Plots, make_scratch

from pytest_mxperf.reporting.history import load_history
from pytest_mxperf.reporting.htmlreport import write_report


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`history_repo.make_scratch`, built once for this file's tests (they only read it)."""
    return make_scratch(tmp_path_factory.mktemp("history"))


BROWSER_TIMEOUT = 120.0


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _leftovers(marker: str) -> list[int]:
    """Pids of processes whose command line names ``marker`` (our browser's profile dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def _run_browser(binary: str, profile: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run headless chromium in its own process group, bounded by a timeout, and make sure
    nothing of it is left running afterwards."""
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        # The page is a file:// URL; nothing may leave the machine. Without these, chromium
        # sends DNS queries for its own services even with background networking off
        # (seen with strace): every name fails to resolve and any HTTP goes to a closed
        # loopback port. What remains is its IPv6 reachability probe, a UDP connect() that
        # sends no packet.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        "--no-pings",
        "--disable-domain-reliability",
        f"--user-data-dir={profile}",
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=BROWSER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish within {BROWSER_TIMEOUT:.0f} s")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # helpers (zygote, renderer) of this browser
    for _ in range(50):
        if not _leftovers(str(profile)):
            break
        time.sleep(0.1)
    assert _leftovers(str(profile)) == [], "chromium processes left running"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.skipif(_chromium() is None, reason="no chromium binary (apt-get install chromium)")
def test_page_renders_in_headless_chromium(scratch: dict[str, Any], tmp_path: Path) -> None:
    binary = _chromium()
    assert binary is not None
    history = load_history(scratch["root"], floors=scratch["floors"])
    page = write_report(history, tmp_path / "mxperf-report.html")
    url = page.resolve().as_uri()

    # One load, with the filter set from the link, dumps the DOM and takes a screenshot: every
    # case is drawn when the page loads (the filter runs after the plots), so the hidden ones
    # are checked as drawn too. (Each chromium start costs 5-20 s on a loaded 2-core machine.)
    shot = tmp_path / "report.png"
    dom = _run_browser(
        binary,
        tmp_path / "profile",
        [
            "--hide-scrollbars",
            "--window-size=1280,2000",
            "--virtual-time-budget=5000",
            "--dump-dom",
            f"--screenshot={shot}",
            f"{url}#hardware={HW}&mode=training",
        ],
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = Plots()
    parsed.feed(dom.stdout)
    expected = {(h.hardware, c.key): len(c.points) for h in history.hardware for c in h.cases}
    assert set(parsed.cases) == set(expected)
    for where, case in parsed.cases.items():
        # plotly ran: each case has its SVG and one marker per stored commit of that case.
        assert case["svg"] >= 1, where
        assert case["points"] == expected[where], where
    # Drawn, not only in the data: an error bar per point, the change labels and the floor.
    r18 = parsed.cases[(HW, R18)]
    assert r18["errorbars"] == expected[(HW, R18)]
    assert {"-27%", "+28%", "expected ≥ 70.0"} <= set(r18["text"])
    assert "expected ≥ 70.0" not in parsed.cases[(HW, MOB)]["text"]
    # The filter: only training cases of the scratch hardware stay visible.
    visible = {where for where, case in parsed.cases.items() if not case["hidden"]}
    assert visible == {(HW, MOB)}

    assert shot.exists(), dom.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as img:
        assert img.size == (1280, 2000)
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "screenshot looks blank"
    keep = os.environ.get("MXPERF_SCREENSHOT_DIR")
    if keep:  # to look at it: MXPERF_SCREENSHOT_DIR=/some/dir pytest ...
        shutil.copy(shot, Path(keep) / "mxperf-report.png")
        shutil.copy(page, Path(keep) / "mxperf-report.html")
