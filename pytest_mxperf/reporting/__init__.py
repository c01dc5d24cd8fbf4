"""What a run shows and writes: terminal tables, JSON, CI summaries, the history page.

- ``report_sections`` / ``tables``: the header lines, the table and benchmark_score grids.
- ``sweep_scaling``: the summary's grid of each sweep and the data-parallel scaling table.
- ``jsonreport``: the JSON report; ``summary``: Markdown and github-action-benchmark output.
- ``pr_comment``: the pull-request comment, rendered from a JSON report.
- ``history``, ``historygit``, ``historytypes``, ``htmlchart``, ``htmlreport``: the page of
  stored history (``mxperf report``).
- ``progress``: elapsed and expected time lines; ``cost``: dollars per million images.
"""
