"""What the performance environment of a result keeps (issue #49): MXNet's documented
settings only, no secret, no short host name."""

from __future__ import annotations

import pytest

from pytest_mxperf.system import fingerprint as fp


def test_perf_environment_keeps_mxnets_documented_variables_and_no_secret() -> None:
    env = {
        "MXNET_SECRET_TOKEN": "ghp_0123456789abcdef",
        "MXNET_API_KEY": "k-123",
        "MXNET_MY_SETTING": "7",
        "MKL_LICENSE_KEY": "abc123",
        "OMP_PASSWORD": "hunter2",
        "KMP_AUTH_TOKEN": "t",
        "MXNET_SUBGRAPH_BACKEND": "MKLDNN",
        "MXNET_EXEC_BULK_EXEC_TRAIN": "0",
        "MXNET_OMP_MAX_THREADS": "2",
        "NNVM_EXEC_MATCH_RANGE": "16",
        "KMP_BLOCKTIME": "0",
    }
    got = fp.perf_environment(env, private=())
    assert got == {
        "KMP_AUTH_TOKEN": "<redacted>",
        "KMP_BLOCKTIME": "0",
        "MKL_LICENSE_KEY": "<redacted>",
        "MXNET_EXEC_BULK_EXEC_TRAIN": "0",
        "MXNET_OMP_MAX_THREADS": "2",
        "MXNET_SUBGRAPH_BACKEND": "MKLDNN",
        "NNVM_EXEC_MATCH_RANGE": "16",
        "OMP_PASSWORD": "<redacted>",
    }
    assert "ghp_" not in repr(got) and "hunter2" not in repr(got)


def test_perf_environment_redacts_short_host_names_as_words() -> None:
    env = {"KMP_AFFINITY": "db", "OMP_PLACES": "db:5000", "OMP_SCHEDULE": "dbl", "OMP_X": "x7"}
    got = fp.perf_environment(env, private=("db", "x7"))
    assert got == {
        "KMP_AFFINITY": "<set>",
        "OMP_PLACES": "<set>",
        "OMP_SCHEDULE": "dbl",  # not the name: a part of a word
        "OMP_X": "<set>",
    }


def test_private_names_keep_short_host_names(monkeypatch: pytest.MonkeyPatch) -> None:
    import platform
    import socket

    monkeypatch.setattr(platform, "node", lambda: "H1")
    monkeypatch.setattr(socket, "gethostname", lambda: "H1")
    assert "h1" in fp.private_names()
