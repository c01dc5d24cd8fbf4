"""Input pipelines on generated images (nothing is downloaded): ImageRecordIter decoding
threads and DataLoader workers swept (train_imagenet's --test-io), and end-to-end training that
is input-bound (a tiny network) or compute-bound (mobilenet0.25), both at 224x224.

The images are built once into a per-user cache (`pytest_mxperf.pipelines.imagedata`): JPEG files in class
folders for ImageFolderDataset and the same images in an indexed RecordIO file. pillow draws
them (``pip install pillow``, or the ``dev`` extra); without it the whole file skips saying so.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mxperf.pipelines.imagedata import NEEDS_PILLOW, ImageSet, image_set

# The images are drawn with pillow (in [dev]); without it the file skips, saying what to install.
pytest.importorskip("PIL", reason=NEEDS_PILLOW)

BATCH = 32


@pytest.fixture(scope="session")
def images() -> ImageSet:
    from pytest_mxperf.system.mxnet_import import import_mxnet

    return image_set(import_mxnet(), size=224, count=256)


@pytest.fixture(scope="session")
def images_300() -> ImageSet:
    from pytest_mxperf.system.mxnet_import import import_mxnet

    return image_set(import_mxnet(), size=300, count=128)


def record_iter(images: ImageSet, batch: int = BATCH, **kw: Any) -> Any:
    import mxnet as mx

    settings = {"preprocess_threads": 1, "rand_mirror": True, "shuffle": True, **kw}
    return mx.io.ImageRecordIter(
        path_imgrec=str(images.rec),
        path_imgidx=str(images.idx),
        data_shape=(3, images.size, images.size),
        batch_size=batch,
        **settings,
    )


def folder_loader(images: ImageSet, batch: int = BATCH, **kw: Any) -> Any:
    import mxnet as mx
    from mxnet.gluon.data.vision import ImageFolderDataset, transforms

    tf = transforms.Compose(
        [
            transforms.RandomResizedCrop(images.size),
            transforms.RandomFlipLeftRight(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    dataset = ImageFolderDataset(str(images.folder)).transform_first(tf)
    return mx.gluon.data.DataLoader(dataset, batch_size=batch, last_batch="discard", **kw)


@pytest.mark.mxperf(sweep={"preprocess_threads": [1, 2]})
def test_imagerecord_threads(mxperf: Any, images: ImageSet) -> None:
    result = mxperf.pipeline(lambda **kw: record_iter(images, **kw), model="imagerecord-224px")
    assert result.status == "ok", result.error


@pytest.mark.mxperf(sweep={"num_workers": [0, 2]})
def test_dataloader_workers(mxperf: Any, images: ImageSet) -> None:
    result = mxperf.pipeline(lambda **kw: folder_loader(images, **kw), model="imagefolder-224px")
    assert result.status == "ok", result.error


def test_imagerecord_ssd_300(mxperf: Any, images_300: ImageSet) -> None:
    result = mxperf.pipeline(record_iter(images_300, batch=16), model="imagerecord-300px")
    assert result.status == "ok", result.error


def tiny_net() -> Any:
    from mxnet.gluon import nn

    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 8, strides=8), nn.GlobalAvgPool2D(), nn.Dense(4))
    return net


def test_training_input_bound(mxperf: Any, mx_ctx: Any, images: ImageSet) -> None:
    """A tiny network trains faster than one decoding process feeds it."""
    result = mxperf.training(
        tiny_net(),
        data=lambda **kw: folder_loader(images, **kw),
        sweep={"num_workers": [0, 2]},
        ctx=mx_ctx,
        model="tiny-conv-224px",
    )
    assert result.status == "ok", result.error


def test_training_compute_bound(mxperf: Any, mx_ctx: Any, images: ImageSet) -> None:
    from mxnet.gluon.model_zoo import vision

    result = mxperf.training(
        vision.mobilenet0_25(classes=4),
        data=record_iter(images, batch=16),
        ctx=mx_ctx,
        model="mobilenet0.25-224px",
    )
    assert result.status == "ok", result.error
