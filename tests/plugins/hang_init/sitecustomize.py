"""Test-only: with HARNESS_TEST_HANG_INIT=1 on PYTHONPATH, rank 1 of an MPICH launch (Hydra
sets PMI_RANK) never reaches MPI_Init, so rank 0 hangs inside it. Other processes (the
workflow, the harness itself) are untouched."""

import os
import time

if os.environ.get("HARNESS_TEST_HANG_INIT") == "1" and os.environ.get("PMI_RANK") == "1":
    while True:
        time.sleep(1)
