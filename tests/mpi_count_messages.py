"""Message counts of harness algorithms on an emulated layout, run under mpiexec:

    mpiexec -n P python tests/mpi_count_messages.py PPN ALGORITHM [ALGORITHM ...]

For each algorithm: one call on one float64 per rank through ``harness.measure.counting.count_call``
(the same function the bench uses), with ``layout=emulated, ppn=PPN``; the result is checked
against the reference, and rank 0 prints one JSON line ``{algorithm: counts}``. Only the
algorithms and numpy are imported, so a launch of many ranks starts quickly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from mpi4py import MPI

from harness import verify
from harness.algorithms import Context, resolve
from harness.layout import resolve as resolve_layout
from harness.measure.counting import count_call


def main() -> int:
    comm = MPI.COMM_WORLD
    ppn, names = int(sys.argv[1]), sys.argv[2:]
    params = {"layout": "emulated", "ppn": ppn}
    lay = resolve_layout(comm, params)
    send = verify.contribution(comm.Get_rank(), 1, "float64", "sum")
    want = verify.expected(comm.Get_size(), 1, "float64", "sum")
    out = {}
    for name in names:
        fn = resolve(name)
        recv = verify.aligned_empty(1, "float64")
        # a correct call first (count_call runs its own on a scratch output)
        ctx = Context(params=dict(params))
        prepare = getattr(fn, "prepare", None)
        if prepare:
            prepare(comm, send, recv, MPI.SUM, ctx)
        fn(comm, send, recv, MPI.SUM, ctx)
        if not comm.allreduce(bool(np.array_equal(recv, want)), op=MPI.LAND):
            if comm.Get_rank() == 0:
                print(f"{name}: wrong result", file=sys.stderr, flush=True)
            return 1
        out[name] = count_call(comm, fn, send, recv, MPI.SUM, params, lay)
    if comm.Get_rank() == 0:
        print(json.dumps(out, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
