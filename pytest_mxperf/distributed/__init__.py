"""Data-parallel training on MXNet's own kvstores: in process, or ranks launched locally.

Imports ``system``, ``config`` and ``measuring``.

- ``train``: build and time one process's training step.
- ``local``: measure on this process's devices (``local``/``device``/``nccl`` kvstores).
- ``launch``: scheduler, servers and workers on 127.0.0.1, bounded in time.
- ``rank`` (``python -m pytest_mxperf.distributed.rank``) / ``rank_env``: one launched rank;
  ``node``: a scheduler or summing server on MXNet's C library alone.
- ``mxnet_launch`` (``python -m pytest_mxperf.distributed.mxnet_launch``): MXNet's own
  ``tools/launch.py`` (local/ssh/mpi) on Python 3.9+, for ranks on several machines.
"""
