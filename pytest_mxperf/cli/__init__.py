"""``mxperf``: look at stored baselines without running pytest (``list``, ``show``, ``report``),
and put a run's verdict on its pull request (``comment``).

- ``commands``: the command line and the ``list``/``show``/``compare`` commands.
- ``report``: ``mxperf report``, the history page and its Markdown summary.
- ``history_commands``: ``mxperf history add|adopt|base|anchor|pr-run|show``, the index of
  paired ratios; ``pr_run``: the pull request run whose pair a main-branch job may adopt.
- ``bisect``: ``mxperf bisect GOOD BAD``, paired runs as the oracle of a binary search.
- ``merge``: ``mxperf merge``, shard reports as one report and one summary.
- ``comment``: ``mxperf comment render|post``; ``github``: the REST calls ``post`` and
  ``pr-run`` make.
"""

from __future__ import annotations

from pytest_mxperf.cli.commands import main

__all__ = ["main"]
