"""Test-only start-up faults, on PYTHONPATH, for rank 1 of an MPICH launch (Hydra sets
PMI_RANK) before it reaches MPI_Init. Other processes (the workflow, the harness itself) are
untouched.

- HARNESS_TEST_HANG_INIT=1: rank 1 never reaches MPI_Init, so rank 0 hangs inside it.
- HARNESS_TEST_DIE_INIT=<path>: when <path> does not exist, rank 1 creates it and kills
  itself with SIGKILL (a launch that dies in start-up once; the next launch works)."""

import os
import signal
import time

if os.environ.get("PMI_RANK") == "1":
    if os.environ.get("HARNESS_TEST_HANG_INIT") == "1":
        while True:
            time.sleep(1)
    marker = os.environ.get("HARNESS_TEST_DIE_INIT")
    if marker and not os.path.exists(marker):
        with open(marker, "w") as fh:
            fh.write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
