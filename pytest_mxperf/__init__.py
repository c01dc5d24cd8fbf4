"""pytest-mxperf: throughput regression testing of Apache MXNet models inside pytest.

What a test or conftest imports is here (``from pytest_mxperf import MxPerf``) and in
`pytest_mxperf.testing` (the fake back end); everything else is internal and may move.

The package is a house of wings; imports run one way, each wing importing only those above
it in this list (``tests/unit/test_wings.py`` checks it):

==============  ==========================================================================
``system``      the machine, its software and repository (hardware key, CPUs, locks, git,
                NVML, CUDA libraries, the one ``import mxnet``)
``config``      options, settings, markers, floors, the case key
``profiles``    MXNet operator profiles: taken, stored as traces, compared, rendered
``measuring``   the timing engine, the runner, records, diagnosis, sweeps, scaling arithmetic
``distributed`` data-parallel processes on MXNet's kvstores (ranks, the local launcher)
``backend``     the MXNet back end (Gluon, Symbol, exported files, tasks)
``pipelines``   data sources and training on them, the input-bound verdict
``baselines``   stored baseline files, which one a case is compared with, the run's facts
``judging``     verdicts from numbers, paired statistics, the messages written from them
``paired``      paired runs: sides, rounds, lock-step turns, fork servers, worktrees, envs
``reporting``   terminal tables, JSON, CI summaries, the history page
``history``     paired ratios over the commits: entries, their store, the index fit, bisect
``run``         the run's state while pytest runs (`MxperfSession`), updating baselines
``case``        the ``mxperf`` fixture and the case path all its methods go through
``plugin``      the pytest entry point ``mxperf``: hooks, configuration, hook specs
``cli``         the ``mxperf`` command
``testing``     the fake back end and git helpers for tests
==============  ==========================================================================

Importing this package imports nothing heavy: the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:
    from pytest_mxperf.case.fixture import MxPerf
    from pytest_mxperf.config.casekey import CaseKey
    from pytest_mxperf.config.markers import MarkerSpec
    from pytest_mxperf.measuring.dp_result import DataParallelResult
    from pytest_mxperf.measuring.dp_scaling import DataParallelSpec
    from pytest_mxperf.measuring.measure import Measurement
    from pytest_mxperf.measuring.records import CaseResult, Outcome, Status, Verdict
    from pytest_mxperf.pipelines.imagedata import ImageSet, image_set
    from pytest_mxperf.system.mxnet_import import MXNetUnavailable, import_mxnet

_PUBLIC = {
    "MxPerf": "pytest_mxperf.case.fixture",
    "CaseKey": "pytest_mxperf.config.casekey",
    "MarkerSpec": "pytest_mxperf.config.markers",
    "DataParallelSpec": "pytest_mxperf.measuring.dp_scaling",
    "DataParallelResult": "pytest_mxperf.measuring.dp_result",
    "Measurement": "pytest_mxperf.measuring.measure",
    "CaseResult": "pytest_mxperf.measuring.records",
    "Outcome": "pytest_mxperf.measuring.records",
    "Status": "pytest_mxperf.measuring.records",
    "Verdict": "pytest_mxperf.measuring.records",
    "ImageSet": "pytest_mxperf.pipelines.imagedata",
    "image_set": "pytest_mxperf.pipelines.imagedata",
    "MXNetUnavailable": "pytest_mxperf.system.mxnet_import",
    "import_mxnet": "pytest_mxperf.system.mxnet_import",
}

__all__ = [
    "CaseKey",
    "CaseResult",
    "DataParallelResult",
    "DataParallelSpec",
    "ImageSet",
    "MXNetUnavailable",
    "MarkerSpec",
    "Measurement",
    "MxPerf",
    "Outcome",
    "Status",
    "Verdict",
    "image_set",
    "import_mxnet",
]


def __getattr__(name: str) -> Any:
    # PEP 562: the plugin imports this package at pytest start-up; keep that import light.
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_mxperf' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
