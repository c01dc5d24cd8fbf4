"""Throughput of this project's networks and of one model-zoo network it fine-tunes.

The plugin initializes each network with random weights; the inputs are random 32x32 images.
Run: pytest --mxperf benchmarks (add --mxperf-ab origin/main to pair with main's code).
"""

from mxnet.gluon.model_zoo import vision

import mynets

IMAGE = (3, 32, 32)


def test_tiny_cnn_inference(mxperf):
    mxperf.inference(mynets.TinyCNN(), batch_size=16, input_shape=IMAGE, model="tiny_cnn")


def test_tiny_cnn_training(mxperf):
    mxperf.training(
        mynets.TinyCNN(), batch_size=16, input_shape=IMAGE, num_classes=10, model="tiny_cnn"
    )


def test_mlp_inference(mxperf):
    mxperf.inference(mynets.MLP(), batch_size=32, input_shape=IMAGE, model="mlp")


def test_mobilenet_inference(mxperf):
    # The model zoo's network, untrained: throughput does not depend on the weights.
    net = vision.mobilenet0_25(classes=10)
    mxperf.inference(net, batch_size=8, input_shape=IMAGE, model="mobilenet0.25")
