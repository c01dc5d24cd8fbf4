"""Input pipelines: a data source alone, or training on it, and the input-bound verdict.

- ``timing``: the timing loops of ``mxperf.pipeline`` / ``mxperf.training(data=...)``.
- ``source``: batches fetched in a helper thread under a timeout.
- ``imagedata``: generated JPEG folders and RecordIO files for pipeline benchmarks.
- ``input_bound``: end-to-end training measurably below the model alone.
"""
