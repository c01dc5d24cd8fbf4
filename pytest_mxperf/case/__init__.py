"""The case path: the ``mxperf`` fixture and the one pipeline every method goes through.

- ``fixture``: `MxPerf`, the methods a test calls.
- ``path``: `CaseBench`: key, skip, claim, device lock, measure, judge, arbitrate.
- ``dataparallel``, ``pipelines``, ``sweeps``: the other methods, through the same path.
- ``pairs``: arbitration and the verdict of a case in ``--mxperf-ab`` mode.
- ``evidence``: the diagnosis attached to a measured case.
"""
