"""The model benchmark suite: the main job (`pytest --mxperf tests/perf`).

Networks of MXNet's published benchmark tables plus small ones, inference and training. The
published images/sec (expectations.csv) reach each case through `@pytest.mark.mxperf`, scoped
to the hardware they were measured on, so a V100 runner checks the V100 rows and a 2-core CPU
runner checks none. `--suite full` sweeps every network over batch sizes up to the published
largest (or the largest that fits), with each published figure attached to its batch size.
"""

from __future__ import annotations

from typing import Any

import pytest
from marks import marks_for
from models import QUICK, Case, SweepCase, build, full_sweeps


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    full = metafunc.config.getoption("suite") == "full"
    if "case" in metafunc.fixturenames:
        cases = () if full or metafunc.config.getoption("suite") == "scaling" else QUICK
        metafunc.parametrize("case", [pytest.param(c, marks=marks_for(c), id=c.id) for c in cases])
    if "sweep_case" in metafunc.fixturenames:
        sweeps = full_sweeps() if full else ()
        metafunc.parametrize(
            "sweep_case",
            [
                pytest.param(s, marks=[m for c in s.points() for m in marks_for(c)], id=s.id)
                for s in sweeps
            ],
        )


def test_throughput(mxperf: Any, mx_ctx: Any, case: Case) -> None:
    measure = getattr(mxperf, case.mode)
    result = measure(
        build(case.model, case.dtype),
        batch_size=case.batch_size,
        ctx=mx_ctx,
        dtype=case.dtype,
        input_shape=(3, case.size, case.size),
        model=case.label,
    )
    assert result.status in ("ok", "oom"), result.error


def test_sweep(mxperf: Any, mx_ctx: Any, sweep_case: SweepCase) -> None:
    """The full selection: each point of the sweep is a case judged against its own batch
    size's baseline and published figure."""
    s = sweep_case
    result = mxperf.sweep(
        lambda: build(s.model, s.dtype),
        batch_sizes="auto",
        mode=s.mode,
        dtypes=[s.dtype],
        start=s.start,
        max_batch=s.max_batch,
        ctx=mx_ctx,
        input_shape=(3, s.size, s.size),
        model=s.label,
    )
    assert all(r.status in ("ok", "oom") for r in result.results), result.lines()
