"""The mxperf markers of a suite case: one per published figure of its network, mode, dtype and
batch (shared by the model suite and the suite-table tests, so no test imports another)."""

from __future__ import annotations

import pytest
from expectations import load
from models import Case


def marks_for(case: Case) -> list[pytest.MarkDecorator]:
    """One mxperf marker per published figure of this network, mode, dtype and batch."""
    marks = []
    for fig in load():
        if (
            fig.images_per_sec is not None
            and fig.model == case.label
            and fig.mode == case.mode
            and fig.dtype == case.dtype
            and fig.batch_size == case.published_batch
        ):
            marks.append(
                pytest.mark.mxperf(
                    expect={case.batch_size: fig.images_per_sec},
                    hardware=fig.hardware,
                    model=case.label,
                    mode=case.mode,
                    dtype=case.dtype,
                )
            )
    return marks
