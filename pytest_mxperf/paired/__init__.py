"""Paired runs: REV's code and the working tree measured on this machine, interleaved.

- ``pairing``: the `Pairer` a run keeps: REV's tree, environments and fork servers.
- ``rounds``: alternating rounds of both sides until each case is decided.
- ``siderun``: a round's side processes run one by one, or in lock-step together.
- ``sides``: one side's process: command line, environment, the plan it reads, its results.
- ``pairdata``: the rounds' results and the pairs, estimates and plans read from them;
  ``more_rounds``: which undecided cases more rounds could decide, or still fail.
- ``pairjson``: the rounds as the JSON report records them.
- ``turns``: lock-step sides taking turns block by block.
- ``forkserver``: one process imports MXNet once; every side is forked from it;
  ``servers``: both sides' fork servers of a session, started early, renewed, closed.
- ``worktree`` / ``envs``: REV's checkout and, if asked, its own Python environment.
- ``gitcmd``: git as the worktrees use it (bounded, no hooks), revisions, registered trees.
"""
