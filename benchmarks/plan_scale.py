#!/usr/bin/env python3
"""Time `harness plan` and `snakemake -n` on a paper-scale matrix (>= 100 000 cells).

3 libraries x every forcible native algorithm (30 in all) x 12 P x 20 sizes x 2 dtypes x
7 delay settings (none, one-late and rand-late at 1, 10, 100 ms). Target: <= 10 s each.

    .venv/bin/python benchmarks/plan_scale.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def main(argv=None):
    doc = {
        "campaign": "scale",
        "launch": "srun",  # a cluster's campaign: P up to 48
        "experiments": {
            "paper": {
                "libraries": ["mpich", "openmpi", "impi"],
                "algorithms": ["native:*"],
                "procs": list(range(4, 52, 4)),
                "sizes": [2**k for k in range(3, 23)],
                "dtypes": ["float32", "float64"],
                "delays": ["none", "one-late", "rand-late"],
                "max_delays": ["1ms", "10ms", "100ms"],
            }
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "scale.yaml"
        cfg.write_text(yaml.safe_dump(doc))
        env = {**os.environ, "HARNESS_RESULTS": f"{tmp}/results", "HARNESS_FIGURES": f"{tmp}/fig"}
        t0 = time.perf_counter()
        out = subprocess.run([str(BIN / "harness"), "plan", "--config", str(cfg)], env=env,
                             capture_output=True, text=True, check=True)
        t_plan = time.perf_counter() - t0
        print(out.stdout.strip())
        t0 = time.perf_counter()
        out = subprocess.run([str(BIN / "snakemake"), "-n", "--quiet", "all", "--snakefile",
                              str(REPO / "Snakefile"), "--directory", f"{tmp}/work",
                              "--configfile", str(cfg)], env=env, capture_output=True, text=True)
        t_dry = time.perf_counter() - t0
        if out.returncode:
            print(out.stderr[-2000:], file=sys.stderr)
            sys.exit(1)
        jobs = [l for l in out.stdout.splitlines() if l.startswith("total")]
        print(f"snakemake -n: {jobs[0] if jobs else out.stdout.strip().splitlines()[-1]}")
    print(f"harness plan : {t_plan:6.2f} s (target <= 10 s)")
    print(f"snakemake -n : {t_dry:6.2f} s (target <= 10 s)")
    return t_plan, t_dry


if __name__ == "__main__":
    main()
