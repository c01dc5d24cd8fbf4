"""The machine, its software and its repository: facts and process plumbing, no pytest.

Lowest wing: every other wing may import it; it imports none of them.

- ``fingerprint``: hardware keys, the thread setting in force, the performance environment.
- ``mxnet_variables``: the MXNet environment variables a result records (documented ones).
- ``cpus``: which CPUs the sides of a paired run may use (pinning, parsing CPU lists).
- ``locks``: cross-process ``flock`` locks for device turns and baseline writes.
- ``codec``: the one codec of typed records at the edges (dataclass to plain data and back).
- ``files``: the one atomic writer (temporary file, fsync, ``os.replace``).
- ``procgroup``: a command in its own process group, bounded in time, nothing left behind.
- ``sigterm``: SIGTERM ending a paired run's controller as Ctrl-C does, through its clean-up.
- ``tempdirs``: the plugin's roots in the shared temporary directory, private and checked.
- ``scratch``: temporary directories named by their process, swept once it is gone.
- ``pluginpath``: the directory side and rank processes import this plugin from (it alone).
- ``gitinfo``: commit facts and ancestry from git, CI variables first.
- ``nvml``: GPU facts from NVML (no MXNet import).
- ``cudalibs`` / ``cuda``: where ``mxnet-cu112``'s CUDA libraries are, and loading them.
- ``fatbin``: the GPU architectures a ``libmxnet.so`` has code for, read from its ELF.
- ``gpuarch``: whether the visible GPUs can run that code; the refusal when they cannot.
- ``mxnet_env``: MXNet's integer environment variables, checked before it is imported.
- ``mxnet_import``: the one place that imports mxnet.
- ``malloc``: glibc's allocator set the same in every process that measures.
"""
