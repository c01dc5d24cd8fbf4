"""The history page: stored baselines in a scratch git repository (a regression, an improvement,
a merged side branch, a file from another repository), rendered by plotly and, where Debian's
chromium is installed, loaded in a real headless browser."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_mxperf import cli
from pytest_mxperf.baselines import store as baselines
from pytest_mxperf.config.floors import Floor
from pytest_mxperf.reporting.history import load_history
from pytest_mxperf.reporting.historytypes import Mark
from pytest_mxperf.reporting.htmlchart import case_figure
from pytest_mxperf.reporting.htmlreport import render_html, write_report
from pytest_mxperf.testing.repos import GIT_ENV, git

REPO_BASELINES = Path(__file__).resolve().parents[2] / "baselines"
HW = "cpu-test-xeon-4c"
R18 = "resnet18_v1-64px/inference/float32/bs8/cpu"
MOB = "mobilenet0.25-64px/training/float32/bs1/cpu"
BROWSER_TIMEOUT = 120.0

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


@pytest.fixture
def scratch(tmp_path: Path) -> dict[str, Any]:
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


def test_history_follows_the_first_parent_line(scratch: dict[str, Any]) -> None:
    history = load_history(scratch["root"], floors=scratch["floors"])
    hw = {h.hardware: h for h in history.hardware}
    assert set(hw) == {HW, "cpu-amd-epyc-2c"}
    r18 = next(c for c in hw[HW].cases if c.key == R18)
    assert [p.commit.sha for p in r18.line] == scratch["line"]
    assert [p.commit.sha for p in r18.off_line] == [scratch["side"]]
    assert r18.off_line[0].commit.subject == "Experiment on a side branch"
    assert [p.mark for p in r18.line] == [
        Mark.NEW,
        Mark.PASS,
        Mark.REGRESSED,
        Mark.PASS,
        Mark.IMPROVED,
        Mark.PASS,
    ]
    assert r18.line[2].commit.subject == "Use a slower convolution layout"
    assert r18.line[0].commit.date == "2025-03-01 11:00:00"  # git's date, in UTC
    assert r18.floor == 70.0
    assert r18.latest.runs == pytest.approx((97.0 * 0.99, 97.0 * 1.01, 97.0))
    assert "not in the first-parent history" in hw[HW].notes[0]
    # This repository's file is unknown to the scratch repository: kept, placed by its date.
    other = hw["cpu-amd-epyc-2c"]
    assert all(not c.in_history and c.date_source == "file" for c in other.commits)
    assert all(len(c.points) == 1 and c.line == c.points for c in other.cases)
    assert "None of the 1 stored commits is in the first-parent history" in other.notes[0]


def test_history_without_a_repository_orders_by_file_date(
    scratch: dict[str, Any], tmp_path: Path
) -> None:
    loose = tmp_path / "loose"
    shutil.copytree(scratch["root"], loose)
    history = load_history(loose)
    assert history.git.repo_root is None
    assert "No git repository" in history.notes[0]
    r18 = next(c for h in history.hardware if h.hardware == HW for c in h.cases if c.key == R18)
    dates = [p.commit.date for p in r18.line]
    assert dates == sorted(dates) and len(dates) == 7
    assert all(p.commit.subject == "" for p in r18.points)
    html = render_html(history)
    assert "No git repository holds" in html


class _Plots(HTMLParser):
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


def test_page_is_self_contained_with_one_plot_per_case(scratch: dict[str, Any]) -> None:
    history = load_history(scratch["root"], floors=scratch["floors"])
    page = render_html(history)
    parsed = _Plots()
    parsed.feed(page)
    expected = {(h.hardware, c.key): len(c.points) for h in history.hardware for c in h.cases}
    ours = sum(len(baselines.load(p).cases) for p in REPO_BASELINES.rglob("*.json"))
    assert set(parsed.cases) == set(expected) and len(expected) == 2 + ours
    for where, case in parsed.cases.items():
        assert case["attrs"]["data-points"] == str(expected[where])
    assert expected[(HW, R18)] == 7
    # No network: no external script, stylesheet or image; plotly's own code is inline.
    assert parsed.external == []
    assert "Plotly.newPlot" in page
    assert page.count('id="filter-') == 4
    assert "Use a slower convolution layout" in page
    assert 'class="regressed"' not in page  # latest verdicts: no regression at HEAD
    r18 = next(c for h in history.hardware if h.hardware == HW for c in h.cases if c.key == R18)
    fig = case_figure(r18)
    assert [s.y0 for s in fig.layout.shapes] == [70.0]  # the floor, as a line
    assert [a.text for a in fig.layout.annotations if a.text != "expected ≥ 70.0"] == [
        "-27%",
        "+28%",
    ]
    assert [t.name for t in fig.data] == ["first-parent history", "not in history"]
    assert list(fig.data[1].marker.symbol) == ["circle-open"]


def test_cli_report_writes_the_page(scratch: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    floors_csv = tmp_path / "floors.csv"
    floors_csv.write_text(
        "# a comment\nhardware,mode,model,batch_size,images_per_sec\n"
        "cpu-test-*,inference,resnet18_v1-64px,8,70\n"
    )
    code = cli.main(
        [
            "--dir",
            str(scratch["root"]),
            "report",
            "--out",
            str(out),
            "--expectations",
            str(floors_csv),
            "--tolerance",
            "0.3",
            "--price-per-hour",
            "3.6",
            "--epoch-images",
            "1000000",
        ]
    )
    assert code == 0
    page = out.read_text(encoding="utf-8")
    assert '<td class="num floor">70.0</td>' in page
    assert "beyond the larger of 30%" in page
    assert "cost at $3.6 per hour" in page
    assert "<th>$ per million images</th><th>epoch (1,000,000 images)</th></tr>" in page
    # 3.6 $/h is $1000 per million images at 1 img/s: each cell is 1000 / the latest img/s.
    history = load_history(scratch["root"])
    r18 = next(c for h in history.hardware if h.hardware == HW for c in h.cases if c.key == R18)
    rate = r18.latest.images_per_sec
    assert rate is not None and f"<td class=num>${1000 / rate:,.2f}</td>" in page


def test_cli_report_bad_expectations_is_a_clear_error(
    scratch: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "floors.json"
    bad.write_text('[{"model": "x"}]')
    code = cli.main(["--dir", str(scratch["root"]), "report", "--expectations", str(bad)])
    assert code == 2
    assert "floors.json[0]: missing batch_size, images_per_sec" in capsys.readouterr().err


# --- the real browser ---------------------------------------------------------------------


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

    dom = _run_browser(
        binary, tmp_path / "profile-dom", ["--virtual-time-budget=15000", "--dump-dom", url]
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Plots()
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

    # The filter, set from the link: only training cases of the scratch hardware stay visible.
    filtered = _run_browser(
        binary,
        tmp_path / "profile-filter",
        ["--virtual-time-budget=15000", "--dump-dom", f"{url}#hardware={HW}&mode=training"],
    )
    parsed = _Plots()
    parsed.feed(filtered.stdout)
    visible = {where for where, case in parsed.cases.items() if not case["hidden"]}
    assert visible == {(HW, MOB)}

    shot = tmp_path / "report.png"
    done = _run_browser(
        binary,
        tmp_path / "profile-shot",
        [
            "--hide-scrollbars",
            "--window-size=1280,2000",
            "--virtual-time-budget=15000",
            f"--screenshot={shot}",
            url + f"#hardware={HW}",  # the filter, set from the link: the scratch history
        ],
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as img:
        assert img.size == (1280, 2000)
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "screenshot looks blank"
    keep = os.environ.get("MXPERF_SCREENSHOT_DIR")
    if keep:  # to look at it: MXPERF_SCREENSHOT_DIR=/some/dir pytest ...
        shutil.copy(shot, Path(keep) / "mxperf-report.png")
        shutil.copy(page, Path(keep) / "mxperf-report.html")
