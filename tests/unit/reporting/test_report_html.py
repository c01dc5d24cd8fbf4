"""The history page: self-contained, one plot per case, and written by ``mxperf report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from history_repo import HW, R18, Plots, make_scratch, repo_points

from pytest_mxperf import cli
from pytest_mxperf.reporting.history import load_history
from pytest_mxperf.reporting.htmlchart import case_figure
from pytest_mxperf.reporting.htmlreport import render_html


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`history_repo.make_scratch`, built once for this file's tests (they only read it)."""
    return make_scratch(tmp_path_factory.mktemp("history"))


def test_page_is_self_contained_with_one_plot_per_case(scratch: dict[str, Any]) -> None:
    history = load_history(scratch["root"], floors=scratch["floors"])
    page = render_html(history)
    parsed = Plots()
    parsed.feed(page)
    expected = {(h.hardware, c.key): len(c.points) for h in history.hardware for c in h.cases}
    assert set(parsed.cases) == set(expected) and len(expected) == 2 + len(repo_points())
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
