# Stage 2: execute one run (one MPI launch). Locally one run at a time (a run takes every
# core: runs oversubscribe and would disturb each other's timings); on Slurm the executor plugin submits it with the run's resources and the
# job script launches with srun. Past run_walltime the run is killed and its unfinished cells
# are recorded as timeout; a run that fails keeps the cells it finished. Either way the run
# document is written, so the rest of the campaign goes on.
import sys


rule measure:
    input:
        script=RES + "/jobs/{run}.sh",
        spec=RES + "/jobs/{run}.json",
    output:
        RES + "/runs/{run}.json",
    params:
        walltime=CAMPAIGN.cfg.run_walltime,
        python=sys.executable,
    threads: workflow.cores
    resources:
        mpi="srun",
        tasks=lambda w: CAMPAIGN.runs[w.run].procs,
        nodes=lambda w: CAMPAIGN.runs[w.run].nodes,
        cpus_per_task=1,
        runtime=CAMPAIGN.walltime_minutes(),
    shell:
        "{params.python:q} -m harness.cli exec {input.spec:q} --timeout {params.walltime}"
