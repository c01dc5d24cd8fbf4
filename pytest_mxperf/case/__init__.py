"""The case path: the ``mxperf`` fixture and the one pipeline every method goes through.

- ``fixture``: `MxPerf`, the methods a test calls.
- ``bench``: `Bench`, one test's benchmark state, and what every step of the path asks of it.
- ``path``: `CaseBench`: key, skip, claim, then the run's role.
- ``roles``: what this process does with a case, chosen once per run: the stored baselines'
  judge (measure, judge, arbitrate), the pair's judge (``--mxperf-ab``), or a paired run's
  side (measure and report figures; no baseline, no verdict).
- ``stored``: a case measured here, and judged against its stored baseline (the steps).
- ``dataparallel``, ``pipelines``, ``sweeps``: the other methods, through the same path.
- ``pairs``: arbitration and the verdict of a case in ``--mxperf-ab`` mode.
- ``jointpair``: before the first case, whether the stored figures hold on this machine; if
  not, one paired run of the stored commit and HEAD measures and judges every case.
- ``evidence``: the diagnosis attached to a measured case.
"""
