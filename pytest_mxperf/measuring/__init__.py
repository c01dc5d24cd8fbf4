"""Measuring without pytest: the timing engine, the runner, the records it produces.

Imports ``system``, ``config`` and ``profiles``.

- ``measure``: warm up until steady, then time blocks of steps that each end in a sync.
- ``runner``: prepare, warm up, measure, check: one case (`run_case`), for every caller.
- ``attempts``: the one attempts loop every kind of case measures with, and the out-of-memory line.
- ``protocol``: the `Backend` protocol the MXNet and fake back ends implement.
- ``records``: `CaseResult`, statuses, data-parallel scaling; ``verdicts``: `Verdict`,
  outcomes, and the message rendered from a verdict's lines (`render_message`).
- ``calibrate``: the calibration probe, one small fixed network timed the same way everywhere.
- ``stats``, ``memory``, ``startup``, ``flops``, ``dtype_support``: figures of a case (``stats``:
  also a paired round's ratio over its block pairs and its error, `paired_blocks`).
- ``sweep_search`` / ``sweep_memory``: the batch-size search of a sweep and its memory budget.
- ``dp_spec`` / ``dp_scaling`` / ``dp_result``: a data-parallel spec (weak or strong
  scaling), its reports and scaling arithmetic, and the result of one run.
- ``diagnosis``: peak memory and the operator profile taken around a case's timed blocks, and
  memory and start-up judged against the baseline (the profiles themselves: ``profiles``).
- ``seeding``: the random state each benchmark test starts from (``--mxperf-seed``).
"""
