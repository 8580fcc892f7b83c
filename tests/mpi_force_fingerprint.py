"""Under MPI: a fingerprint of the native allreduce result for each catalogue entry named on
the command line, on random float64 data, where floating-point rounding depends on the
order in which an algorithm adds. Mode ``mpit``: each entry forced on a communicator through
``harness.mpit`` (one launch for all); mode ``env``: the launch environment forces it (one
launch per entry). Prints ``FP <entry> <sha1>`` on rank 0 and the mechanism used. With
FP_COUNTS (comma-separated element counts) in mode ``env`` it prints, per count,
``FPC <entry> <count> <sha1>`` instead (the tuned-selection tests: which algorithm ran at
which size)."""

import hashlib
import os
import sys

import mpi4py

# the thread level the launch initialises (FP_THREAD_LEVEL; mpi4py's own default otherwise)
mpi4py.rc.thread_level = os.environ.get("FP_THREAD_LEVEL", "multiple")
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from harness import mpit
from harness.libraries import get_library

mode, names = sys.argv[1], sys.argv[2:]
comm = MPI.COMM_WORLD
rng = np.random.default_rng(1234 + comm.Get_rank())
send = rng.standard_normal(1001)
recv = np.empty_like(send)
lib = mpit.running_library()
if os.environ.get("FP_COUNTS"):
    for name in names:
        for count in (int(c) for c in os.environ["FP_COUNTS"].split(",")):
            data = np.random.default_rng(99 + comm.Get_rank()).standard_normal(count)
            out = np.empty_like(data)
            comm.Allreduce(data, out, MPI.SUM)
            if comm.Get_rank() == 0:
                print("FPC", name, count, hashlib.sha1(out.tobytes()).hexdigest()[:16], flush=True)
    sys.exit(0)
for name in names:
    if mode == "mpit":
        f = mpit.force(comm, lib, get_library(lib).native(name).env)
        if f.before:
            f.before()
        f.comm.Allreduce(send, recv, MPI.SUM)
        if f.after:
            f.after()
        how = f.mechanism
    else:
        comm.Allreduce(send, recv, MPI.SUM)
        how = "env"
    if comm.Get_rank() == 0:
        print("FP", name, hashlib.sha1(recv.tobytes()).hexdigest()[:16], how, flush=True)
