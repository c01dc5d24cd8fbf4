"""The networks of MXNet's published benchmark tables, and the cases the suite runs.

Gluon model-zoo networks with random weights (nothing is downloaded), and Inception-BN as an
``mx.sym`` network (inception_bn.py), which the model zoo lacks. Import of mxnet happens only
when a network is built, so collecting the suite never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Input size each network is published at (benchmark_score: 299 for Inception-v3, else 224).
NATIVE_SIZE = {
    "alexnet": 224,
    "vgg16": 224,
    "inception-bn": 224,
    "inceptionv3": 299,
    "resnet50_v1": 224,
    "resnet152_v1": 224,
    "resnet18_v1": 224,
    "mobilenet1.0": 224,
    "squeezenet1.1": 224,
}
PUBLISHED = ("alexnet", "vgg16", "inception-bn", "inceptionv3", "resnet50_v1", "resnet152_v1")
SMALL = ("resnet18_v1", "mobilenet1.0", "squeezenet1.1")
#: The published AlexNet training figures used 16 times the batch size their tables show.
ALEXNET_TRAINING_BATCH_FACTOR = 16


@dataclass(frozen=True)
class Case:
    """One benchmark of the suite: network, mode, dtype, batch size and square input size."""

    model: str
    mode: str
    batch_size: int
    size: int
    dtype: str = "float32"

    @property
    def label(self) -> str:
        """The case's model label: the network id at its published input size, else
        ``<id>-<size>px`` so reduced-size cases never meet the published expectations."""
        native = NATIVE_SIZE[self.model]
        return self.model if self.size == native else f"{self.model}-{self.size}px"

    @property
    def published_batch(self) -> int:
        """The batch size the published table shows for this case."""
        if self.model == "alexnet" and self.mode == "training":
            return self.batch_size // ALEXNET_TRAINING_BATCH_FACTOR
        return self.batch_size

    @property
    def id(self) -> str:
        parts = [self.label, self.mode, f"bs{self.batch_size}"]
        return "-".join(parts + ([self.dtype] if self.dtype != "float32" else []))


def build(model: str, dtype: str = "float32") -> Any:
    """A fresh network with uninitialized (random at bind) weights and 1000 classes."""
    if model == "inception-bn":
        from inception_bn import get_symbol

        return get_symbol(num_classes=1000, dtype=dtype)
    from mxnet.gluon.model_zoo import vision

    return vision.get_model(model, classes=1000)


#: The quick selection: sized for a 2-core CPU runner (the whole main job in a few minutes).
#: Reduced input sizes keep every network in it cheap; training only where a step is fast.
QUICK: tuple[Case, ...] = (
    Case("resnet18_v1", "inference", 1, 64),
    Case("resnet18_v1", "inference", 8, 64),
    Case("resnet18_v1", "training", 8, 32),
    Case("mobilenet1.0", "inference", 1, 64),
    Case("mobilenet1.0", "inference", 8, 64),
    Case("mobilenet1.0", "training", 8, 32),
    Case("squeezenet1.1", "inference", 1, 224),
    Case("inception-bn", "inference", 1, 64),
    Case("inception-bn", "inference", 8, 64),
    Case("inception-bn", "training", 8, 64),
    Case("inceptionv3", "inference", 1, 299),
    Case("resnet50_v1", "inference", 1, 64),
    Case("resnet50_v1", "inference", 8, 64),
    Case("alexnet", "inference", 8, 64),
    Case("vgg16", "inference", 1, 32),
)

#: The published tables' largest batch sizes: where the full selection's sweeps stop doubling.
INFERENCE_MAX_BATCH = 256
TRAINING_MAX_BATCH = 128


@dataclass(frozen=True)
class SweepCase:
    """One sweep of the full selection: ``mxperf.sweep(..., batch_sizes="auto")`` from
    ``start`` doubling to ``max_batch`` (or the largest batch that fits, then bisecting)."""

    model: str
    mode: str
    size: int
    dtype: str
    start: int
    max_batch: int

    def points(self) -> list[Case]:
        """The cases the doubling reaches when everything fits (the published batch sizes)."""
        out, batch = [], self.start
        while batch <= self.max_batch:
            out.append(Case(self.model, self.mode, batch, self.size, self.dtype))
            batch *= 2
        return out

    @property
    def label(self) -> str:
        return self.points()[0].label

    @property
    def id(self) -> str:
        parts = [self.label, self.mode, "sweep"]
        return "-".join(parts + ([self.dtype] if self.dtype != "float32" else []))


def full_sweeps() -> tuple[SweepCase, ...]:
    """The full selection (GPU runners): every network at its published size, inference swept
    over batch sizes 1-256 in float32 and float16, training over 1-128 in float32 (AlexNet
    training at 16x the batch, as published). float16 sweeps skip on CPU."""
    sweeps: list[SweepCase] = []
    for model in PUBLISHED + SMALL:
        size = NATIVE_SIZE[model]
        for dtype in ("float32", "float16"):
            sweeps.append(SweepCase(model, "inference", size, dtype, 1, INFERENCE_MAX_BATCH))
        factor = ALEXNET_TRAINING_BATCH_FACTOR if model == "alexnet" else 1
        sweeps.append(
            SweepCase(model, "training", size, "float32", factor, TRAINING_MAX_BATCH * factor)
        )
    return tuple(sweeps)


def full() -> tuple[Case, ...]:
    """Every case the full selection's sweeps reach by doubling."""
    return tuple(case for sweep in full_sweeps() for case in sweep.points())


# data-parallel scaling (test_scaling.py) -------------------------------------------------------
# Factories "models:<name>": launched ranks import them (they get this process's sys.path).


def mobilenet0_25() -> Any:
    """MobileNet 0.25 with 10 classes: small enough for dist_sync ranks on a 2-core runner."""
    from mxnet.gluon.model_zoo import vision

    return vision.mobilenet0_25(classes=10)


def resnet18_v1() -> Any:
    """ResNet-18 v1 with 10 classes: the CPU scaling suite's ResNet (at 32x32, 4 per worker, a
    pair of dist_sync launches fits in about a minute on 2 cores)."""
    from mxnet.gluon.model_zoo import vision

    return vision.resnet18_v1(classes=10)


def resnet50_v1() -> Any:
    """ResNet-50 v1 with 1000 classes, as the published multi-GPU scaling figures."""
    from mxnet.gluon.model_zoo import vision

    return vision.resnet50_v1(classes=1000)


@dataclass(frozen=True)
class ScalingCase:
    """One data-parallel case: img/s(1) and img/s(N) of a network with one kvstore."""

    factory: str
    label: str
    kvstore: str
    world_size: int
    batch_per_device: int
    size: int

    @property
    def id(self) -> str:
        return f"{self.label}-{self.kvstore}-x{self.world_size}-bs{self.batch_per_device}"


#: CPU: 1 and 2 dist_sync workers with 1 server on 127.0.0.1 (MobileNet about 35 s on 2 vCPUs;
#: ResNet-18 68 s of case wall time there while other jobs loaded the machine, load average ~10).
SCALING_CPU: tuple[ScalingCase, ...] = (
    ScalingCase("models:mobilenet0_25", "mobilenet0.25-32px", "dist_sync", 2, 16, 32),
    ScalingCase("models:resnet18_v1", "resnet18_v1-32px", "dist_sync", 2, 4, 32),
)
#: GPU runners: ResNet-50 at 2, 4 and 8 GPUs of one process (each case measures 1 GPU too);
#: sizes the runner lacks skip.
SCALING_GPU: tuple[ScalingCase, ...] = tuple(
    ScalingCase("models:resnet50_v1", "resnet50_v1", kv, n, 32, 224)
    for kv in ("device", "nccl")
    for n in (2, 4, 8)
)
