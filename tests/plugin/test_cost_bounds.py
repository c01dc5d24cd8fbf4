"""Cost options that would overflow the cost arithmetic are refused up front (issue #49): a
usage error at configure, not a traceback at the end that loses the JSON report."""

from __future__ import annotations

import pytest

from pytest_mxperf import cli
from pytest_mxperf.config import parsers

HUGE_EPOCH = "1" + "0" * 400


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--mxperf-price-per-hour", "1e308", "must be > 0 dollars an hour and at most 1,000,000"),
        ("--mxperf-price-per-hour", "inf", "must be > 0 dollars an hour"),
        ("--mxperf-epoch-images", HUGE_EPOCH, "must be a whole number of images from 1 to"),
    ],
)
def test_a_cost_option_that_overflows_is_a_usage_error(
    fake_pytester: pytest.Pytester, option: str, value: str, message: str
) -> None:
    fake_pytester.makepyfile("def test_x(): pass")
    result = fake_pytester.runpytest("--mxperf", option, value, "--mxperf-json=r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*invalid value *for command line option {option}: {message}*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_the_largest_values_taken_give_finite_costs() -> None:
    from pytest_mxperf.reporting import cost

    price = parsers.price_per_hour(str(parsers.MAX_PRICE_PER_HOUR))
    images = parsers.epoch_images(str(parsers.MAX_EPOCH_IMAGES))
    assert cost.epoch_dollars(1e-3, price, images) < float("inf")
    assert cost.dollars_per_million_images(1e-3, price) < float("inf")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--price-per-hour", "1e308"], "must be > 0 dollars an hour and at most 1,000,000"),
        (["--price-per-hour", "inf"], "must be > 0 dollars an hour"),
        (["--epoch-images", HUGE_EPOCH], "must be a whole number of images from 1 to"),
        (["--epoch-images", "many"], "must be a number, got 'many'"),
    ],
)
def test_mxperf_report_refuses_them_too(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["report", *argv])
    assert done.value.code == 2
    assert message in capsys.readouterr().err
