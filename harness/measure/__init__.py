"""The MPI side of a measurement: what runs inside a launch. ``bench`` (the repetition loop of
one run's cells, ``python -m harness.measure.bench <spec>``), ``arrival`` (the arrival
monitor of the PAP algorithms), ``counting`` (messages counted per call), ``sgd`` (the
distributed SGD training program). Nothing here plans, reports or reads a config."""
