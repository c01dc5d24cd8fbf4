"""An entry's standard error is the pair's own: the half-width of its interval in logs over the
t quantile it was taken with (`verdict.interval_df`), not the normal one; entries from reports
written before that field still load, read as before."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from history_data import paired_report

from pytest_mxperf.history import entries
from pytest_mxperf.judging.decisions import Policy, decide_paired
from pytest_mxperf.judging.pairstats import PairedEstimate, PairedRound, paired_estimate
from pytest_mxperf.judging.tdist import t_quantile
from pytest_mxperf.system import codec

A, B = "a" * 40, "b" * 40
#: The normal quantile of a 99% interval.
Z99 = 2.5758


def _estimate(*ratios: float) -> PairedEstimate:
    return paired_estimate([PairedRound(100.0, 100.0 * r) for r in ratios])


def _report(estimate: PairedEstimate) -> dict[str, Any]:
    """A paired report of one case whose verdict is the one `decide_paired` gives ``estimate``,
    as the JSON report writes it."""
    report = paired_report(B, A, {"alpha": estimate.ratio})
    verdict = codec.to_dict(decide_paired(estimate, Policy()))
    report["cases"][0]["verdict"].update(
        {k: verdict[k] for k in ("status", "change", "interval", "interval_level", "interval_df")}
    )
    report["cases"][0]["verdict"]["interval"] = list(verdict["interval"])
    back: dict[str, Any] = json.loads(json.dumps(report))  # as read back from the file
    return back


def test_a_3_round_99_percent_interval_gives_back_the_estimates_own_standard_error() -> None:
    slower = _estimate(0.92, 0.91, 0.93)
    (found,) = entries.from_report(_report(slower))
    assert found.status == "regressed" and found.level == 0.99 and found.df == 2
    own = slower.sd / math.sqrt(3)  # the per-round SD over the root of the rounds
    assert found.log_se == pytest.approx(own, rel=1e-9)
    # Read with the normal quantile, as before the field, it was 3.9 times that.
    old = entries.from_report(_strip(_report(slower)))[0]
    assert old.df is None
    assert old.log_se / own == pytest.approx(t_quantile(0.995, 2) / Z99, rel=1e-4)
    assert old.log_se / own == pytest.approx(3.85, abs=0.01)


def test_a_pass_gives_back_the_standard_error_of_its_equivalence_interval() -> None:
    same = _estimate(1.0, 1.004, 0.997)
    (found,) = entries.from_report(_report(same))
    assert found.status == "pass" and found.level == same.same_level and found.df == same.df
    assert found.log_se == pytest.approx(same.sd / math.sqrt(3), rel=1e-9)


def _strip(report: dict[str, Any]) -> dict[str, Any]:
    for case in report["cases"]:
        del case["verdict"]["interval_df"]
    return report


def test_a_report_written_before_the_field_still_loads_and_reads_as_before() -> None:
    report = paired_report(B, A, {"alpha": 0.90, "beta": 1.00})
    assert all("interval_df" not in c["verdict"] for c in report["cases"])
    found = {e.case: e for e in entries.from_report(report)}
    assert found["alpha"].df is None and found["beta"].df is None
    half = (math.log(0.90 * 1.02) - math.log(0.90 * 0.98)) / 2
    assert found["alpha"].log_se == pytest.approx(half / Z99, rel=1e-4)  # the normal quantile
    # Its stored line is as it was before the field (no "df"), and reads back the same.
    line = found["alpha"].to_line()
    assert '"df"' not in line
    assert entries.parse_lines(line, "h") == [found["alpha"]]


def test_the_df_is_stored_and_read_back() -> None:
    (found,) = entries.from_report(_report(_estimate(0.92, 0.91, 0.93)))
    line = found.to_line()
    assert json.loads(line)["df"] == 2
    (back,) = entries.parse_lines(line, "h")
    assert back == found and back.log_se == found.log_se


@pytest.mark.parametrize("bad", [0, -1, 2.5, "2", True])
def test_a_bad_df_is_refused_by_name(bad: object) -> None:
    report = _report(_estimate(0.92, 0.91, 0.93))
    report["cases"][0]["verdict"]["interval_df"] = bad
    with pytest.raises(entries.EntryError, match=r"r\.json: case .alpha.: degrees of freedom"):
        entries.from_report(report, "r.json")
    data = json.loads(entries.from_report(_report(_estimate(0.92, 0.91, 0.93)))[0].to_line())
    data["df"] = bad
    with pytest.raises(entries.EntryError, match="h, line 1: degrees of freedom"):
        entries.parse_lines(json.dumps(data), "h")
