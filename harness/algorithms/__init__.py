"""Registry of allreduce algorithms.

Every algorithm is a function ``allreduce(comm, sendbuf, recvbuf, op, ctx)`` that leaves the
reduction of all ranks' ``sendbuf`` in ``recvbuf`` on every rank. It does no timing and no
I/O; ``ctx`` carries the cell's parameters and scratch space allocated once, outside the
timed loop. Families live one per module and register with ``@register``; a plugin module
(``--plugin path.py``) can register more.

``native:<name>`` is not in the registry: it is the library's own ``MPI_Allreduce``, forced
to ``<name>`` by the launch environment (see ``harness/data/libraries.yaml``).
"""

from . import (
    guidelines,  # noqa: F401  (registers the performance-guideline mock-ups)
    node_aware,  # noqa: F401  (registers NAP and SMP)
    p2p,  # noqa: F401  (registers the classic algorithms)
    p2p_bench,  # noqa: F401  (registers pingpong and reduce_local)
    pap,  # noqa: F401  (registers SLT and PRR)
    shm,  # noqa: F401  (registers the shared-memory allreduce)
    suara,  # noqa: F401  (registers SUARA2)
)
from .registry import REGISTRY, Algorithm, Context, harness_names, load_plugin, register, resolve  # noqa: F401
