"""The run's state while pytest runs, and what happens at its end.

- ``session``: `MxperfSession`: settings, run facts, results from every report (xdist too).
- ``preflight``: the run's calibration against the stored baselines, and its joint pair.
- ``outputs``: checking output paths early and keeping results when a write fails.
- ``updating``: ``--mxperf-update``: which results may become baselines.
"""
