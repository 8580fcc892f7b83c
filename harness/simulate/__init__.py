"""Simulated platforms: the harness's own algorithms run unchanged on SimGrid, and the
libraries' C algorithms run by SMPI on the same platform for reference (docs/simulation.md).

``platform`` (a cluster as a SimGrid platform file), ``loader`` (SimGrid's Python module),
``comm`` (the simulated communicator), ``cell`` (``simulate_allreduce``: one cell simulated),
``smpi`` (``smpi_allreduce``: SMPI's own ``MPI_Allreduce``, forced to one of its algorithms).
"""
