"""Two small Gluon networks: a convolutional classifier and a multi-layer perceptron."""

from mxnet.gluon import nn


class TinyCNN(nn.HybridBlock):
    """Two convolutions and a dense layer: 3x32x32 images to ``classes`` scores."""

    def __init__(self, classes=10, width=16, **kwargs):
        super().__init__(**kwargs)
        self.features = nn.HybridSequential()
        self.features.add(
            nn.Conv2D(width, 3, padding=1, activation="relu"),
            nn.MaxPool2D(2),
            nn.Conv2D(2 * width, 3, padding=1, activation="relu"),
            nn.GlobalAvgPool2D(),
        )
        self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


class MLP(nn.HybridBlock):
    """Flattened 3x32x32 images through two hidden layers."""

    def __init__(self, classes=10, hidden=256, **kwargs):
        super().__init__(**kwargs)
        self.body = nn.HybridSequential()
        self.body.add(
            nn.Flatten(),
            nn.Dense(hidden, activation="relu"),
            nn.Dense(hidden, activation="relu"),
            nn.Dense(classes),
        )

    def hybrid_forward(self, F, x):
        return self.body(x)
