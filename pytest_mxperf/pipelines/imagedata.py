"""Generated image data for pipeline benchmarks: JPEG files in class folders (for
``gluon.data.vision.ImageFolderDataset``) and the same images in an indexed RecordIO file (for
``mx.io.ImageRecordIter``), written with MXNet's ``mx.recordio`` as ``im2rec`` does.

Nothing is downloaded: images are smooth random gradients with shapes on them, so they compress
and decode like photographs rather than like noise. Built once per (size, count, seed) into a
per-user cache directory, under a lock, atomically (a half-built directory is never used).
"""

from __future__ import annotations

import io
import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mxperf.system import locks, tempdirs

#: Bump when the generated content changes, so stale caches are rebuilt.
VERSION = 1


@dataclass(frozen=True)
class ImageSet:
    """Where a generated image set lives."""

    root: Path
    size: int
    count: int
    classes: int

    @property
    def folder(self) -> Path:
        """Class folders of JPEG files (``ImageFolderDataset(root=...)``)."""
        return self.root / "folder"

    @property
    def rec(self) -> Path:
        return self.root / "images.rec"

    @property
    def idx(self) -> Path:
        return self.root / "images.idx"


def cache_root() -> Path:
    """``<tempdir>/pytest-mxperf-cache-<uid>/images`` (overridable: PYTEST_MXPERF_DATA_CACHE)."""
    override = os.environ.get("PYTEST_MXPERF_DATA_CACHE")
    if override:
        return Path(override)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    # The shared root is checked to be this user's alone (tempdirs.UnsafeTempDir otherwise).
    shared = Path(tempfile.gettempdir()) / f"pytest-mxperf-cache-{uid}"
    return tempdirs.private_dir(shared) / "images"


#: Why generated images cannot be made here, with the install line (pillow draws them; it is
#: in the ``dev`` extra, not in ``cpu``/``report``: the plugin itself does not need it).
NEEDS_PILLOW = (
    "pillow is not installed (it draws the generated JPEG images of pipeline benchmarks): "
    "pip install pillow"
)


def image_jpeg(rng: random.Random, size: int, quality: int = 90) -> bytes:
    """One generated JPEG: a two-colour gradient with a few ellipses and rectangles."""
    try:
        from PIL import Image, ImageDraw
    except ImportError:
        raise ImportError(NEEDS_PILLOW) from None

    a = [rng.randrange(256) for _ in range(3)]
    b = [rng.randrange(256) for _ in range(3)]
    horizontal = Image.linear_gradient("L").resize((size, size))
    if rng.random() < 0.5:
        horizontal = horizontal.rotate(90)
    img = Image.composite(
        Image.new("RGB", (size, size), tuple(a)),
        Image.new("RGB", (size, size), tuple(b)),
        horizontal,
    )
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(3, 8)):
        x0, y0 = rng.randrange(size), rng.randrange(size)
        x1, y1 = x0 + rng.randint(8, size // 2), y0 + rng.randint(8, size // 2)
        colour = tuple(rng.randrange(256) for _ in range(3))
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape((x0, y0, x1, y1), fill=colour)
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def build(mx: Any, root: Path, *, size: int, count: int, classes: int, seed: int) -> None:
    """Write ``count`` JPEGs into class folders and into ``images.rec``/``images.idx``
    (``MXIndexedRecordIO`` + ``recordio.pack`` with an ``IRHeader`` label, as im2rec does;
    ``pack_img`` would re-encode through the cv2 module, which this environment lacks, so the
    JPEG bytes are packed as they are, im2rec's pass-through)."""
    rng = random.Random(seed)
    record = mx.recordio.MXIndexedRecordIO(str(root / "images.idx"), str(root / "images.rec"), "w")
    try:
        for i in range(count):
            label = i % classes
            jpeg = image_jpeg(rng, size)
            folder = root / "folder" / f"class{label}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:05d}.jpg").write_bytes(jpeg)
            header = mx.recordio.IRHeader(0, float(label), i, 0)
            record.write_idx(i, mx.recordio.pack(header, jpeg))
    finally:
        record.close()


def image_set(
    mx: Any, *, size: int = 224, count: int = 256, classes: int = 4, seed: int = 0
) -> ImageSet:
    """The generated image set for these parameters, built on first use (once per machine and
    user; later runs reuse it)."""
    base = cache_root()
    name = f"v{VERSION}-{size}px-{count}-c{classes}-s{seed}"
    final = base / name
    done = final / "DONE"
    if not done.exists():
        base.mkdir(parents=True, exist_ok=True)
        with locks.exclusive(base / f"{name}.lock"):
            if not done.exists():
                scratch = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))
                try:
                    build(mx, scratch, size=size, count=count, classes=classes, seed=seed)
                    (scratch / "DONE").write_text("ok\n")
                    if final.exists():
                        shutil.rmtree(final)  # an older half-built copy without DONE
                    scratch.rename(final)
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
    return ImageSet(root=final, size=size, count=count, classes=classes)
