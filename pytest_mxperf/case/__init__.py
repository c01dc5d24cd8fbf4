"""The case path: the ``mxperf`` fixture and the one pipeline every method goes through.

- ``fixture``: `MxPerf`, the methods a test calls.
- ``bench``: `Bench`, one test's benchmark state, and what every step of the path asks of it.
- ``path``: `CaseBench`: key, skip, claim, device lock, measure, judge, arbitrate.
- ``stored``: a case measured here and judged against its stored baseline (the path's steps).
- ``dataparallel``, ``pipelines``, ``sweeps``: the other methods, through the same path.
- ``pairs``: arbitration and the verdict of a case in ``--mxperf-ab`` mode.
- ``jointpair``: before the first case, whether the stored figures hold on this machine; if
  not, one paired run of the stored commit and HEAD measures and judges every case.
- ``evidence``: the diagnosis attached to a measured case.
"""
