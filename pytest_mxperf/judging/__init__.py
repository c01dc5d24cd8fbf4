"""Deciding and explaining: a verdict from numbers, then the message from the verdict.

- ``decisions``: expectation floor, then the stored baseline; noise is never a regression.
- ``pairstats`` / ``tdist``: the statistics of a paired A/B comparison and its decision.
- ``roundeffect``: a paired run's round effect, pooled over its cases, for the equivalence
  interval of a case whose rounds disagree more than their blocks predict.
- ``pairplan``: the rounds a paired comparison projects: how many would decide, an interval's
  width at a number of rounds.
- ``explain`` / ``explain_scaling``: the messages a user reads, written from decided verdicts.
- ``evidence_lines``: the evidence sections of a regression's message (operators, commits).
- ``changes``: what changed in the software under a figure, and the lines naming it.
"""
