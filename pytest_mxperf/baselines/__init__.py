"""Stored baselines: the files, which one each case is compared with, and the run's facts.

- ``store``: ``<root>/<hardware key>/<commit sha>.json``, versioned, written atomically; its
  cases read back typed (`StoredCase`).
- ``entry``: what a file keeps of a measured case, typed (`BaselineRecord`), written once.
- ``kept_runs``: the last few runs a stored case keeps, and the nearest a new figure is judged by.
- ``calibration``: how fast the storing machine ran the calibration probe (a file's field).
- ``resolution``: nearest ancestor of HEAD, an explicit revision, or the newest by date.
- ``runinfo``: run facts computed once on the controller and shipped to workers.
"""
