"""Paired runs: REV's code and the working tree measured on this machine, interleaved.

- ``pairing``: the sides' command lines and files, the rounds, the `Pairer`.
- ``pairdata``: the rounds' results and the pairs, estimates and plans read from them.
- ``turns``: lock-step sides taking turns block by block.
- ``forkserver``: one process imports MXNet once; every side is forked from it.
- ``worktree`` / ``envs``: REV's checkout and, if asked, its own Python environment.
"""
