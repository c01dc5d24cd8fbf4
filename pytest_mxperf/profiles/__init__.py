"""MXNet operator profiles: a case's warm step profiled, kept, compared with the baseline's.

Imports only ``system``; ``measuring`` (its diagnosis) and ``judging`` (the evidence sections of a
regression's message) use it.

- ``profiling``: a case's warmed-up steps profiled with MXNet's profiler, its trace written
  if asked.
- ``profile_record``: `OperatorProfile`: per operator how often it ran and for how long.
- ``profile_trace``: Chrome-trace files of a profile, read back and written with their table.
- ``profile_diff``: two profiles compared per step and per image (`diff_profiles`).
- ``profile_render``: a profile diff written as the short lines of a failure message.
"""
