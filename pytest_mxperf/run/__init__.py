"""The run's state while pytest runs, and what happens at its end.

- ``session``: `MxperfSession`: settings, run facts, results from every report (xdist too).
- ``collected``: the results gathered from every report, and collection errors' text.
- ``preflight``: the run's calibration against the stored baselines, and its joint pair.
- ``outputs``: checking output paths early and keeping results when a write fails.
- ``updating``: ``--mxperf-update``: which results may become baselines.
"""
