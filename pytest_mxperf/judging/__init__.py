"""Deciding and explaining: a verdict from numbers, then the message from the verdict.

- ``verdict``: expectation floor, then the stored baseline; noise is never a regression.
- ``pairstats`` / ``tdist``: the statistics of a paired A/B comparison.
- ``explain`` / ``explain_scaling``: the messages a user reads, written from decided verdicts.
"""
