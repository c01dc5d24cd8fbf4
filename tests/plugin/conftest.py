"""Set-ups the plugin's end-to-end tests share: a scratch git repository (the pytester
directory, see ``fake_pytester`` and ``commit`` in the root conftest) holding a fake-back-end
suite, with or without a stored baseline."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from pytest_mxperf.testing.repos import (
    PAIR_SUITE,
    SPEEDS_SUITE,
    inflate_baselines,
    read_report,
    write_speeds,
)


@pytest.fixture
def store_baseline(
    fake_pytester: pytest.Pytester, commit: Callable[[str], str]
) -> Callable[..., str]:
    """A stored baseline in a scratch repository: ``store_baseline(suite, passed=2)`` writes
    ``suite`` as the pytester directory's ``test_suite.py``, commits it (``message``, "A") and
    stores its baselines with ``pytest --mxperf --mxperf-update`` (each of the ``passed`` cases
    passes; the files are left uncommitted). Returns that commit's sha."""

    def store(suite: str, passed: int = 2, message: str = "A") -> str:
        fake_pytester.makepyfile(test_suite=suite)
        sha = commit(message)
        fake_pytester.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=passed)
        return sha

    return store


@pytest.fixture
def suite(fake_pytester: pytest.Pytester, commit: Callable[[str], str]) -> pytest.Pytester:
    """`SPEEDS_SUITE` committed ("suite") with alpha at 400 and beta at 200 img/s."""
    fake_pytester.makepyfile(test_suite=SPEEDS_SUITE)
    write_speeds(fake_pytester.path, alpha=400, beta=200)
    commit("suite")
    return fake_pytester


@pytest.fixture
def stored_suite(suite: pytest.Pytester) -> pytest.Pytester:
    """`suite` with its baselines stored at HEAD (``--mxperf-update``; files not committed)."""
    suite.runpytest("--mxperf", "--mxperf-update").assert_outcomes(passed=2)
    return suite


#: The conftest of a real-MXNet suite that runs out of CPU memory on purpose: once MXNet is
#: loaded and warm, the session limits its own address space to at most ``{headroom}`` bytes
#: more, so a huge batch fails to allocate quickly instead of pushing the machine into swap.
#: It measures without the machine probes, which these tests do not check
#: (`pytest_mxperf.testing.unprobed`).
CPU_OOM_CONFTEST = """
import re
import resource

import pytest

from pytest_mxperf.testing.unprobed import UnprobedMXNetBackend

HEADROOM = {headroom}


@pytest.fixture(scope="session")
def mxperf_backend():
    return UnprobedMXNetBackend()


def _vm_size():
    status = open("/proc/self/status").read()
    return int(re.search(r"VmSize:\\s+(\\d+)", status).group(1)) * 1024


@pytest.fixture(scope="session", autouse=True)
def limited_memory():
    import mxnet as mx

    mx.nd.ones((4, 4)).wait_to_read()  # engine and thread pools up before the limit
    resource.setrlimit(resource.RLIMIT_AS, (_vm_size() + HEADROOM, resource.RLIM_INFINITY))
"""

#: The models of the CPU-OOM suites (``from oom_models import net``).
CPU_OOM_MODELS = """
def net():
    from mxnet.gluon.model_zoo import vision

    return vision.get_model("mobilenet0.25", classes=10)


def elementwise():
    import mxnet as mx

    class Scale(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.relu(x * 2.0 + 1.0)

    return Scale()
"""


@pytest.fixture
def cpu_oom_run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[..., tuple[pytest.RunResult, list[Any]]]:
    """``cpu_oom_run(suite, headroom, *args, timeout=300)``: run ``suite`` (its tests import
    ``net``/``elementwise`` from ``oom_models``) in a pytest process of its own under the
    `CPU_OOM_CONFTEST` limit, with ``--mxperf``, short timings and ``args``; -> the run and the
    cases of its JSON report. Skips without MXNet or an address-space limit (Linux).

    The run has a temporary directory of its own, as ``fake_pytester``'s runs do, so its
    machine-wide device locks are its own: it never waits its turn behind another pytest
    --mxperf run on this machine (seen: a 300 s timeout while another job measured)."""
    pytest.importorskip("mxnet")
    resource = pytest.importorskip("resource")
    assert resource.RLIMIT_AS  # Linux: an address-space limit bounds the probe
    monkeypatch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmpdir")))

    def run(
        suite: str, headroom: int, *args: str, timeout: float = 300.0
    ) -> tuple[pytest.RunResult, list[Any]]:
        pytester.makeconftest(CPU_OOM_CONFTEST.format(headroom=headroom))
        pytester.makepyfile(oom_models=CPU_OOM_MODELS, test_oom=suite)
        fast = ["--mxperf-min-time", "0.2", "--mxperf-max-time", "0.5", "--mxperf-warmup-time", "1"]
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--mxperf", "--mxperf-json", "r.json", *fast, *args,
            timeout=timeout,
        )  # fmt: skip
        return result, read_report(pytester.path, "r.json")["cases"]

    return run


@pytest.fixture
def store_elsewhere(
    fake_pytester: pytest.Pytester,
    commit: Callable[[str], str],
    store_baseline: Callable[..., str],
) -> Callable[..., str]:
    """``store_elsewhere(code_changed=True, calibration=False)``: `PAIR_SUITE`'s baselines
    stored at commit A, then raised 40% in the files as if a machine 1.4x faster had stored
    them (its anonymous id, and its calibration probe with ``calibration``), committed as B
    with a file beside them when ``code_changed`` (else only baseline files differ from A, and
    no pair is needed: tests/plugin/test_same_code.py). Returns A's sha."""

    def store(code_changed: bool = True, calibration: bool = False) -> str:
        base = store_baseline(PAIR_SUITE.format(speed=100.0))
        inflate_baselines(fake_pytester.path, 1.4, machine="0badc0ffee00", calibration=calibration)
        if code_changed:
            (fake_pytester.path / "NOTES.md").write_text("B\n")
        commit("B: baselines from a faster machine")
        return base

    return store
