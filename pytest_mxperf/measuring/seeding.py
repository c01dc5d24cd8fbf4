"""The random state a benchmark test starts from (``--mxperf-seed``).

Random weights, synthetic data and a pipeline's augmentations are drawn from Python's
``random`` (Gluon's ``RandomResizedCrop`` picks its crops there), numpy's global generator
(a shuffling ``DataLoader``) and MXNet's (``initialize()``, ``RandomFlipLeftRight``). Left
alone, the two sides of a paired run draw different numbers: Python reseeds ``random`` in every
forked child, so each side of each round crops differently (a crop's size sets what resizing it
costs, so the two sides' blocks in turns do different work), and numpy's generator is not
reseeded at all, so each side repeats its own fork server's draws in every round. Seeding each
test from the same number and its node id gives both sides, and every run, the same draws.
"""

from __future__ import annotations

import random
import sys
import zlib


def seed_for(base: int, nodeid: str) -> int:
    """The seed of one test: ``base`` and its node id mixed, in [0, 2**31) (MXNet's seed is a
    C ``int``)."""
    return zlib.crc32(nodeid.encode("utf-8"), base & 0xFFFFFFFF) & 0x7FFFFFFF


def seed_generators(seed: int) -> list[str]:
    """Seed Python's ``random`` and, those already imported, numpy's global generator and
    MXNet's (a test module imports them before its tests' setup; importing them here would
    cost a test that never uses them, MXNet over a second). Returns the names seeded."""
    random.seed(seed)
    seeded = ["random"]
    numpy = sys.modules.get("numpy")
    if numpy is not None and hasattr(numpy, "random"):
        numpy.random.seed(seed)
        seeded.append("numpy")
    mx = sys.modules.get("mxnet")
    if mx is not None and hasattr(mx, "random"):
        mx.random.seed(seed)
        seeded.append("mxnet")
    return seeded
