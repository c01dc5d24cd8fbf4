"""The MXNet back end on tiny real models: every accepted model form and every mode."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

mx = pytest.importorskip("mxnet")

from mxnet.gluon.model_zoo import vision  # noqa: E402

from pytest_mxperf.backend.mxnet_backend import MXNetBackend  # noqa: E402
from pytest_mxperf.measuring.measure import MeasureConfig, measure  # noqa: E402
from pytest_mxperf.measuring.protocol import Backend, ModelFileError, PrepareSpec, SpecError  # noqa: E402
from pytest_mxperf.measuring.records import Status  # noqa: E402
from pytest_mxperf.measuring.runner import run_case  # noqa: E402

QUICK = MeasureConfig(
    min_time=0.05, max_time=0.2, warmup_time=0.3, warmup_min_time=0.0, block_time=0.02, min_blocks=3
)
SHAPE = (3, 32, 32)


@pytest.fixture(scope="module")
def backend() -> MXNetBackend:
    checked: Backend = MXNetBackend()  # mypy checks the class against the Protocol
    assert isinstance(checked, MXNetBackend)
    return checked


def prep(backend: MXNetBackend, model: Any, **spec: Any) -> Any:
    return backend.prepare(model, PrepareSpec(**spec))


def tiny() -> Any:
    return vision.mobilenet0_25(classes=10)


def run(backend: MXNetBackend, net: Any, mode: str, **kw: Any) -> tuple[Any, float]:
    prepared = prep(backend, net, mode=mode, batch_size=4, ctx=mx.cpu(), input_shape=SHAPE, **kw)
    m = measure(
        prepared.step,
        items_per_step=prepared.items_per_step,
        sync=backend.sync,
        clock=backend.clock,
        config=QUICK,
    )
    assert prepared.check() is None
    return prepared, m.items_per_sec


@pytest.mark.parametrize("mode", ["inference", "training", "forward_backward"])
def test_hybrid_block(backend: MXNetBackend, mode: str) -> None:
    net = tiny()
    prepared, rate = run(backend, net, mode)
    assert rate > 0 and prepared.items_per_step == 4
    assert prepared.info["form"] == "gluon-hybrid"
    assert net._active  # hybridized


def test_training_updates_weights_and_forward_backward_does_not(backend: MXNetBackend) -> None:
    for mode, changes in (("training", True), ("forward_backward", False)):
        net = tiny()
        prepared = prep(backend, net, mode=mode, batch_size=2, ctx=mx.cpu(), input_shape=SHAPE)
        weight = net.collect_params()[sorted(net.collect_params())[0]]
        before = weight.data().asnumpy().copy()
        for _ in range(2):
            prepared.step()
        backend.sync()
        assert (abs(weight.data().asnumpy() - before).max() > 0) == changes, mode
        assert weight.grad().asnumpy().any()


def test_custom_loss_and_optimizer(backend: MXNetBackend) -> None:
    calls = []

    def loss(out: Any, label: Any) -> Any:
        calls.append(1)
        return mx.gluon.loss.L2Loss()(out, mx.nd.one_hot(label, 10))

    _, rate = run(
        backend,
        tiny(),
        "training",
        loss=loss,
        optimizer="adam",
        optimizer_params={"learning_rate": 0.001},
    )
    assert rate > 0 and calls


class Imperative(mx.gluon.Block):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        with self.name_scope():
            self.dense = mx.gluon.nn.Dense(10)

    def forward(self, x: Any) -> Any:
        return self.dense(x.reshape((x.shape[0], -1)))


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_non_hybrid_block(backend: MXNetBackend, mode: str) -> None:
    prepared, rate = run(backend, Imperative(), mode)
    assert rate > 0 and prepared.info["form"] == "gluon-imperative"


def _symbol(loss_head: bool) -> Any:
    net = tiny()
    sym = net(mx.sym.var("data"))
    return mx.sym.SoftmaxOutput(sym, name="softmax") if loss_head else sym


@pytest.mark.parametrize("mode", ["inference", "training", "forward_backward"])
@pytest.mark.parametrize("loss_head", [True, False])
def test_symbol_bound_like_benchmark_score(
    backend: MXNetBackend, mode: str, loss_head: bool
) -> None:
    prepared, rate = run(backend, _symbol(loss_head), mode)
    assert rate > 0 and prepared.info["form"] == "symbol-module"


def test_symbol_without_data_input_is_rejected(backend: MXNetBackend) -> None:
    sym = mx.sym.FullyConnected(mx.sym.var("pixels"), num_hidden=3)
    with pytest.raises(ValueError, match="no input named 'data'"):
        prep(backend, sym, mode="inference", batch_size=1, ctx=mx.cpu(), input_shape=(4,))


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_exported_model_files(backend: MXNetBackend, tmp_path: Path, mode: str) -> None:
    net = tiny()
    net.initialize()
    net.hybridize()
    net(mx.nd.zeros((1, *SHAPE)))
    net.export(str(tmp_path / "tiny"), epoch=3)
    for given in (tmp_path / "tiny", str(tmp_path / "tiny-symbol.json")):
        _, rate = run(backend, given, mode)
        assert rate > 0


def test_exported_model_missing_files(backend: MXNetBackend, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        prep(backend, str(tmp_path / "nope"), mode="inference", batch_size=1, ctx=mx.cpu())
    (tmp_path / "half-symbol.json").write_text(tiny()(mx.sym.var("data")).tojson())
    with pytest.raises(FileNotFoundError, match=r"NNNN\.params"):
        prep(backend, str(tmp_path / "half"), mode="inference", batch_size=1, ctx=mx.cpu())


def test_plain_callable(backend: MXNetBackend) -> None:
    a = mx.nd.ones((64, 64))
    prepared, rate = run(backend, lambda: mx.nd.dot(a, a), "inference", items_per_call=5)
    assert prepared.items_per_step == 5 and rate > 0 and prepared.computed()
    with pytest.raises(SpecError, match="items_per_call"):
        prep(backend, lambda: None, mode="inference", batch_size=1, ctx=mx.cpu())


def test_callable_returning_none_computed_nothing(backend: MXNetBackend) -> None:
    prepared, _ = run(backend, lambda: None, "inference", items_per_call=1)
    assert not prepared.computed()


def test_model_errors_are_error_rows_not_usage_errors(backend: MXNetBackend) -> None:
    class Broken(mx.gluon.HybridBlock):  # type: ignore[misc,name-defined]
        def hybrid_forward(self, F: Any, x: Any) -> Any:
            raise ValueError("this model cannot take that input")

    spec = PrepareSpec(mode="inference", batch_size=2, ctx=mx.cpu(), input_shape=SHAPE)
    done = run_case(backend, Broken(), spec, QUICK)
    assert done.status == Status.ERROR
    assert done.error == "ValueError: this model cannot take that input"
    with pytest.raises(ModelFileError, match="does not exist"):
        run_case(backend, "/nonexistent/model", spec, QUICK)


def test_unsupported_object(backend: MXNetBackend) -> None:
    with pytest.raises(TypeError, match="cannot benchmark a int"):
        prep(backend, 3, mode="inference", batch_size=1, ctx=mx.cpu())


class NaNNet(mx.gluon.HybridBlock):  # type: ignore[misc,name-defined]
    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.log(F.zeros_like(x) - 1)


def test_nan_output_is_reported(backend: MXNetBackend) -> None:
    prepared = prep(
        backend, NaNNet(), mode="inference", batch_size=2, ctx=mx.cpu(), input_shape=(3,)
    )
    prepared.step()
    backend.sync()
    assert prepared.check() == "model output contains NaN/inf (6 of 6 values)"


def test_software_record(backend: MXNetBackend) -> None:
    record = backend.software()
    assert record["mxnet"] == mx.__version__
    assert "MKLDNN" in record["mxnet_features"].split(",")
    assert record["numpy"].startswith("1.")


def test_oom_classification(backend: MXNetBackend) -> None:
    assert backend.is_oom(mx.base.MXNetError("cudaMalloc retry failed: out of memory"))
    assert backend.is_oom(MemoryError())
    assert not backend.is_oom(mx.base.MXNetError("Check failed: shape mismatch"))
    assert not backend.is_oom(ValueError("out of memory"))  # not an MXNet error


def test_end_to_end_measures_the_model_and_the_pipeline_alone_in_its_first_round_only(
    backend: MXNetBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A paired side's later rounds time the steps per block of the case's first round (the
    # training's) and the training only: the pair compares that figure alone.
    from pytest_mxperf.pipelines import timing

    plans: list[int | None] = []
    for name, at in (("run_case", 3), ("run_pipeline", 2)):  # where each takes its config
        real = getattr(timing, name)

        def spy(*args: Any, _real: Any = real, _at: int = at, **kw: Any) -> Any:
            plans.append(args[_at].steps_per_block)
            return _real(*args, **kw)

        monkeypatch.setattr(timing, name, spy)
    batches = [(mx.nd.ones((2, 3, 8, 8)), mx.nd.zeros((2,))) for _ in range(4)]
    spec = PrepareSpec(mode="training", batch_size=2, ctx=mx.cpu(), input_shape=(3, 8, 8))
    extras = []
    for steps in (None, 7):  # the first round, then a later one
        net = mx.gluon.nn.HybridSequential()
        net.add(mx.gluon.nn.Dense(4))  # not initialized: the later round makes it ready too
        run = timing.run_end_to_end(
            backend, net, batches, spec, replace(QUICK, steps_per_block=steps), timeout=30.0
        )
        assert run.status == Status.OK, run.error
        m = run.measurement
        assert m is not None and m.extra["form"] == "end-to-end"
        assert steps is None or m.steps_per_block == steps
        extras.append(m.extra)
    assert plans == [None, None]  # measured once each, in the first round
    assert set(timing.ALONE_FIGURES) <= set(extras[0])
    assert not set(timing.ALONE_FIGURES) & set(extras[1])
