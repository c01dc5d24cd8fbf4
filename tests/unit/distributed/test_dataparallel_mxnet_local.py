"""Data-parallel cases with real MXNet in one process (several CPU contexts, a local kvstore;
GPU kvstores where there are GPUs), exported symbol files as the model, and the oneDNN weight
layouts a dist kvstore cannot send."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from dp_ranks import SPEC, TINY, Watch

from pytest_mxperf.distributed.launch import launch, run_distributed
from pytest_mxperf.distributed.local import run_in_process

mx = pytest.importorskip("mxnet")

import mxperf_dp_models as models  # noqa: E402  (beside this file; ranks import it too)


@pytest.fixture
def no_test_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (models.INJECT_ENV, models.DIE_ENV, models.HANG_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# oneDNN weight layouts ------------------------------------------------------------------------


def default_layout(array: Any) -> bool:
    """Whether MXNet can hand out the array's memory as is (DLPack needs the default
    layout: an array in a oneDNN layout raises "We can't generate TBlob for MKLDNN data")."""
    try:
        capsule = mx.nd.to_dlpack_for_read(array)
    except mx.base.MXNetError as exc:
        assert "MKLDNN" in str(exc)
        return False
    del capsule
    return True


def weights_of(net: Any) -> list[Any]:
    params = net.collect_params()
    return [p.data() for name, p in params.items() if name.endswith("weight")]


def test_an_inference_forward_leaves_conv_weights_that_default_layouts_restores() -> None:
    from pytest_mxperf.distributed.train import default_layouts

    net = models.biased_convnet()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.ones((1, 3, 16, 16)))  # inference mode: oneDNN keeps conv weights its own way
    mx.nd.waitall()
    weights = weights_of(net)
    if all(default_layout(w) for w in weights):
        pytest.skip("this MXNet build keeps weights in the default layout (no oneDNN)")
    values = [w.asnumpy() for w in weights]
    default_layouts(mx, net.collect_params())
    assert all(default_layout(w) for w in weights)
    assert all((w.asnumpy() == v).all() for w, v in zip(weights, values))


def test_the_training_step_leaves_weights_in_the_default_layout() -> None:
    # Its forward that finds the number of classes used to run in inference mode.
    from pytest_mxperf.distributed.train import build_training_step

    net = models.biased_convnet()
    spec = replace(
        SPEC,
        factory="mxperf_dp_models:biased_convnet",
        kvstore="local",
        contexts=("cpu(0)",),
        input_shape=(3, 16, 16),
        batch_per_device=2,
    )
    build_training_step(mx, net, [mx.cpu(0)], spec, kv=None)
    mx.nd.waitall()
    assert all(default_layout(w) for w in weights_of(net))


def test_default_layouts_skips_parameters_not_initialized_yet() -> None:
    from pytest_mxperf.distributed.train import default_layouts

    net = models.biased_convnet()
    net.initialize()  # shapes unknown until the first forward: deferred
    default_layouts(mx, net.collect_params())
    net(mx.nd.ones((1, 3, 16, 16)))


# in one process -----------------------------------------------------------------------------


def test_in_process_two_cpu_contexts_with_local_kvstore(no_test_env: pytest.MonkeyPatch) -> None:
    spec = replace(SPEC, kvstore="local", contexts=("cpu(0)", "cpu(1)"), measure=TINY)
    result = run_in_process(spec)
    assert (result.kvstore, result.world_size) == ("local", 2)
    (single,) = result.single.workers
    (scaled,) = result.scaled.workers
    assert single.contexts == ("cpu(0)",) and scaled.contexts == ("cpu(0)", "cpu(1)")
    # One device needs no exchange (as Trainer decides), two go through the kvstore.
    assert single.compute is None and result.single.comm_share == 0.0
    assert scaled.compute is not None and 0 <= result.comm_share <= 1
    assert scaled.full.items_per_step == 2 * 16
    assert result.efficiency == result.images_per_sec / (2 * result.single.images_per_sec)


def test_exported_symbol_files_as_the_model(
    tmp_path: Path, no_test_env: pytest.MonkeyPatch
) -> None:
    net = models.dense_net()
    net.initialize()
    net.hybridize()
    net(mx.nd.zeros((1, 3, 32, 32)))
    net.export(str(tmp_path / "mlp"))
    symbol = str(tmp_path / "mlp-symbol.json")
    spec = replace(SPEC, factory=symbol, step_hook=None, measure=TINY)
    # In one process, and in a launched worker (which imports nothing of the test).
    result = run_in_process(replace(spec, kvstore="local", contexts=("cpu(0)", "cpu(1)")))
    assert result.images_per_sec > 0
    assert result.scaled.workers[0].full.items_per_step == 2 * 16
    watch = Watch()
    (report,) = launch(replace(spec, workers=1), run_id=watch.run_id, on_poll=watch)
    assert report.images_per_sec > 0 and report.contexts == ("cpu(0)",)
    watch.assert_all_gone()


def _gpus() -> int:
    try:
        return int(mx.context.num_gpus())
    except Exception:
        return 0


@pytest.mark.skipif(_gpus() < 2, reason="MXNet sees fewer than 2 GPUs")
@pytest.mark.parametrize("kvstore", ["device", "nccl"])
def test_in_process_gpu_kvstores(kvstore: str, no_test_env: pytest.MonkeyPatch) -> None:
    spec = replace(SPEC, kvstore=kvstore, contexts=("gpu(0)", "gpu(1)"))
    result = run_in_process(spec)
    assert result.world_size == 2 and result.images_per_sec > 0
    assert result.scaled.workers[0].contexts == ("gpu(0)", "gpu(1)")


@pytest.mark.skipif(_gpus() < 2, reason="MXNet sees fewer than 2 GPUs")
def test_dist_device_sync_one_gpu_per_worker(no_test_env: pytest.MonkeyPatch) -> None:
    spec = replace(SPEC, kvstore="dist_device_sync", contexts=("gpu(0)",))
    result = run_distributed(spec)
    assert [w.contexts for w in result.scaled.workers] == [("gpu(0)",), ("gpu(1)",)]
