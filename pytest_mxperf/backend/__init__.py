"""The MXNet back end: what a user hands the fixture, turned into timed steps.

Imports the wings below it; only code reached from here (and ``system.mxnet_import``)
touches MXNet.

- ``mxnet_backend``: `MXNetBackend` (Gluon blocks, Symbols, exported files, callables).
- ``models``: benchmark_score-style steps on synthetic device-resident data.
- ``tasks``: labels and losses for classification, segmentation and detection.
"""
