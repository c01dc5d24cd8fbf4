"""One version: `pytest_mxperf.__version__` is what the package metadata, ``mxperf --version``,
the changelog, the install lines of the docs and newly stored baseline files say."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import pytest_mxperf
from pytest_mxperf.baselines.store import BaselineError, load, store
from pytest_mxperf.cli.commands import main

ROOT = Path(__file__).resolve().parents[3]
VERSION = pytest_mxperf.__version__
HW = "cpu-test-2c"
SHA = "a" * 40


def test_the_version_is_a_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)


def test_the_package_metadata_reads_the_version_from_the_attribute() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    dynamic = project["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "pytest_mxperf.__version__"}
    # setuptools reads a plain string assignment without importing the package.
    source = (ROOT / "pytest_mxperf" / "__init__.py").read_text()
    assert f'\n__version__ = "{VERSION}"\n' in source


def test_mxperf_version_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"mxperf {VERSION}\n"


def test_the_changelog_has_the_version_and_an_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased"
    assert "0.1.0" in headings
    unreleased = text.split("## [Unreleased]", 1)[1].split("\n## ", 1)[0]
    assert f"Version {VERSION}" in unreleased or VERSION in headings
    # Every heading's link is defined at the end (Keep a Changelog).
    assert all(f"\n[{h}]: https://" in text for h in headings)


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_install_lines_name_this_version(page: str) -> None:
    text = (ROOT / page).read_text()
    wheels = set(re.findall(r"pytest_mxperf-([0-9][^-]*)-py3-none-any\.whl", text))
    tags = set(re.findall(r"pytest-mxperf@v([0-9][0-9.]*[0-9])", text))
    assert wheels == {VERSION}
    assert tags == {VERSION}


def test_a_stored_case_records_the_version_that_measured_it(tmp_path: Path) -> None:
    case = {"images_per_sec": 10.0, "rel_iqr": 0.01, "pytest_mxperf_version": VERSION}
    path = store(tmp_path, HW, {"sha": SHA}, {"x": case})
    assert json.loads(path.read_text())["cases"]["x"]["pytest_mxperf_version"] == VERSION
    assert load(path).cases["x"].plugin_version == VERSION


def test_a_file_stored_before_versions_were_recorded_still_loads_and_merges(
    tmp_path: Path,
) -> None:
    path = tmp_path / HW / f"{SHA}.json"
    path.parent.mkdir(parents=True)
    old = {"images_per_sec": 10.0, "runs": [10.0], "status": "ok"}
    path.write_text(json.dumps({"schema": 1, "commit": {"sha": SHA}, "cases": {"x": old}}))
    assert load(path).cases["x"].plugin_version is None
    store(tmp_path, HW, {"sha": SHA}, {"x": {"images_per_sec": 12.0, "pytest_mxperf_version": "9"}})
    again = load(path)
    assert again.cases["x"].plugin_version == "9"
    assert again.cases["x"].runs == (10.0, 12.0)  # a new version keeps the case's runs
    assert json.loads(path.read_text())["schema"] == 1


def test_a_version_that_is_not_a_string_is_named(tmp_path: Path) -> None:
    path = tmp_path / HW / f"{SHA}.json"
    path.parent.mkdir(parents=True)
    case = {"images_per_sec": 10.0, "pytest_mxperf_version": 2}
    path.write_text(json.dumps({"schema": 1, "commit": {"sha": SHA}, "cases": {"x": case}}))
    with pytest.raises(BaselineError, match="'pytest_mxperf_version' must be a string, got 2"):
        load(path)


def test_the_wheel_check_project_pins_this_version() -> None:
    # scripts/wheel_check.sh installs the wheel in place of this line; a user's pin names it.
    lines = (ROOT / "tests/data/wheel-project/requirements.txt").read_text().splitlines()
    assert f"pytest-mxperf[cpu]=={VERSION}" in lines
