"""Shape, size and forward checks of the Inception-BN symbol used by the benchmark tests."""

from __future__ import annotations

from types import ModuleType

import pytest

mx = pytest.importorskip("mxnet")
np = pytest.importorskip("numpy")

# 11,295,240 = conv weights and biases + batch-norm gamma/beta + FC 1024x1000 (+ bias), counted by
# hand from the layer table of MXNet's inception-bn.py (= the paper's Figure 5 with 1000 classes).
EXPECTED_PARAMS = 11_295_240

# (block, channels, side) at 224x224. Channels are those of the paper's Figure 5. The paper's
# stage 3 is 28x28; MXNet's definition pools the stem without padding, giving 27x27 (then 14, 7).
STAGE_OUTPUTS = [
    ("3a", 256, 27),
    ("3b", 320, 27),
    ("3c", 576, 14),
    ("4a", 576, 14),
    ("4b", 576, 14),
    ("4c", 608, 14),
    ("4d", 608, 14),
    ("4e", 1056, 7),
    ("5a", 1024, 7),
    ("5b", 1024, 7),
]


def _load() -> ModuleType:
    import inception_bn  # tests/perf is on sys.path for the tests in it

    return inception_bn


@pytest.fixture(scope="module")
def inception_bn() -> ModuleType:
    return _load()


def _param_count(sym: object, data_shape: tuple[int, ...]) -> int:
    arg_shapes, _, _ = sym.infer_shape(data=data_shape)  # type: ignore[attr-defined]
    names = sym.list_arguments()  # type: ignore[attr-defined]
    return sum(
        int(np.prod(shape))
        for name, shape in zip(names, arg_shapes)
        if name not in ("data", "softmax_label")
    )


def test_output_shape_at_224(inception_bn: ModuleType) -> None:
    sym = inception_bn.get_symbol()
    assert sym.name == "softmax"
    assert sym.list_arguments()[0] == "data"
    assert "softmax_label" in sym.list_arguments()
    _, out_shapes, _ = sym.infer_shape(data=(2, 3, 224, 224))
    assert out_shapes == [(2, 1000)]


def test_num_classes(inception_bn: ModuleType) -> None:
    _, out_shapes, _ = inception_bn.get_symbol(num_classes=10).infer_shape(data=(3, 3, 224, 224))
    assert out_shapes == [(3, 10)]


def test_parameter_count(inception_bn: ModuleType) -> None:
    count = _param_count(inception_bn.get_symbol(), (2, 3, 224, 224))
    assert 11_200_000 < count < 11_400_000  # "about 11 M" for Inception-BN
    assert count == EXPECTED_PARAMS


def test_stage_output_sizes_match_the_paper(inception_bn: ModuleType) -> None:
    internals = inception_bn.get_symbol().get_internals()
    outputs = internals.list_outputs()
    concats = [name for name in outputs if name.endswith("_concat_output")]
    assert len(concats) == len(STAGE_OUTPUTS)
    for block, channels, side in STAGE_OUTPUTS:
        name = f"in{block}_concat_output"
        assert name in outputs, name
        _, shapes, _ = internals[name].infer_shape(data=(1, 3, 224, 224))
        assert shapes == [(1, channels, side, side)], block
    convs = [name for name in outputs if name.endswith("_conv_output")]
    # 3 in the stem, 7 in each of the 8 type A blocks, 5 in each of the 2 type B blocks.
    assert len(convs) == 3 + 8 * 7 + 2 * 5


@pytest.mark.parametrize("side", [13, 32, 64])
def test_small_inputs_work(inception_bn: ModuleType, side: int) -> None:
    # The final pool is global, so tests can use cheap small images; 13 px is the smallest.
    sym = inception_bn.get_symbol()
    _, out_shapes, _ = sym.infer_shape(data=(1, 3, side, side))
    assert out_shapes == [(1, 1000)]
    assert _param_count(sym, (1, 3, side, side)) == EXPECTED_PARAMS


def test_too_small_input_is_rejected(inception_bn: ModuleType) -> None:
    with pytest.raises(mx.base.MXNetError):
        inception_bn.get_symbol().infer_shape(data=(1, 3, 12, 12))


def test_float16_casts_at_both_ends(inception_bn: ModuleType) -> None:
    sym = inception_bn.get_symbol(dtype="float16")
    _, out_shapes, _ = sym.infer_shape(data=(2, 3, 224, 224))
    assert out_shapes == [(2, 1000)]
    arg_types, out_types, _ = sym.infer_type(data="float32")
    types = dict(zip(sym.list_arguments(), arg_types))
    assert types["data"] == np.float32
    assert types["fc_weight"] == np.float16
    assert types["stem1_conv_weight"] == np.float16
    assert out_types == [np.float32]
    assert _param_count(sym, (2, 3, 224, 224)) == EXPECTED_PARAMS


def test_float32_has_no_casts(inception_bn: ModuleType) -> None:
    sym = inception_bn.get_symbol()
    arg_types, _, _ = sym.infer_type(data="float32")
    assert set(arg_types) == {np.float32}
    assert not [name for name in sym.get_internals().list_outputs() if "fp16" in name]


@pytest.mark.parametrize("kwargs", [{"dtype": "bfloat16"}, {"num_classes": 0}])
def test_bad_arguments(inception_bn: ModuleType, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        inception_bn.get_symbol(**kwargs)


def test_module_forward_on_cpu(inception_bn: ModuleType) -> None:
    # Bound the way benchmark_score.py binds its symbols: Module, inference only, random weights.
    mod = mx.mod.Module(inception_bn.get_symbol(), context=mx.cpu())
    mod.bind(
        data_shapes=[("data", (1, 3, 224, 224))],
        label_shapes=[("softmax_label", (1,))],
        for_training=False,
    )
    mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
    batch = mx.io.DataBatch(data=[mx.nd.random.uniform(shape=(1, 3, 224, 224))], label=None)
    mod.forward(batch, is_train=False)
    probs = mod.get_outputs()[0].asnumpy()
    assert probs.shape == (1, 1000)
    assert np.isfinite(probs).all()
    assert (probs >= 0).all()
    assert probs.sum() == pytest.approx(1.0, abs=1e-4)
