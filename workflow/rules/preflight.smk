# Stage 0: each installation the campaign measures checked before any run is launched: its
# setup lines, launcher and libmpi, the family its version string names, what it can force,
# and a P=2 launch (harness/measure/preflight.py). Every run waits for every installation's
# check, so one bad declaration stops the campaign before its first measurement.

import json
import sys

localrules: installation


rule installation:
    output:
        RES + "/installations/{library}.decl.json",
    params:
        declaration=lambda w: json.dumps(CAMPAIGN.declaration(w.library), sort_keys=True),
    run:
        CAMPAIGN.write_declaration(wildcards.library, output[0])


rule preflight:
    input:
        RES + "/installations/{library}.decl.json",
    output:
        RES + "/installations/{library}.json",
    params:
        python=sys.executable,
    threads: workflow.cores
    resources:
        mpi="srun",
        tasks=2,
        nodes=1,
        cpus_per_task=1,
        runtime=10,
    shell:
        "{params.python:q} -m harness.cli preflight {input:q} {output:q}"


PREFLIGHT_OUTPUTS = [RES + f"/installations/{lib}.json" for lib in CAMPAIGN.installations()]
