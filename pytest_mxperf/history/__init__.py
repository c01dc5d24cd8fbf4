"""Paired ratios over the commits: a history that holds when every job is a new machine.

- ``entries``: one record per case per paired job, read from a JSON report.
- ``entrystore``: the JSON Lines file on a git branch (or in a directory) they are kept in.
- ``fit``: the least-squares index over the commit graph; ``index``: entries to fits.
- ``anchors``: which commits a main-branch job pairs HEAD with.
- ``adoption``: a pull request's own pair as the entries of the commit it was merged as.
- ``fromrun``: ``--mxperf-history``, a paired run adding its own entries at its end.
- ``bisection``: the first commit that moved, by binary search with paired runs.
- ``shards``: shard reports as one, every shard accounted for.
- ``page``: the index on the history page (``mxperf report --history``).
"""
