# Stage 2: execute one run (one MPI launch). Locally one run at a time (a run takes every
# core: runs oversubscribe and would disturb each other's timings); on Slurm the executor plugin submits it with the run's resources and the
# job script launches with srun. Past run_walltime the run is killed and its unfinished cells
# are recorded as timeout; a run that fails keeps the cells it finished. Either way the run
# document is written, so the rest of the campaign goes on.
import sys


def _per_node(run):
    """Ranks per node when they split evenly over several nodes, with more than one each (the
    plugin refuses tasks_per_node=1); else None and the run asks for its task count. A
    simulated run is one process on one node."""
    per, rest = divmod(run.procs, run.nodes)
    return per if run.nodes > 1 and not rest and per > 1 and not run.platform else None


def _tasks(run):
    return 1 if run.platform else None if _per_node(run) else run.procs


rule measure:
    input:
        script=RES + "/jobs/{run}.sh",
        spec=RES + "/jobs/{run}.json",
        installations=PREFLIGHT_OUTPUTS,  # workflow/rules/preflight.smk
    output:
        RES + "/runs/{run}.json",
    params:
        walltime=CAMPAIGN.cfg.run_walltime,
        python=sys.executable,
    threads: workflow.cores
    resources:
        mpi="srun",
        # Slurm wants exactly one of tasks and tasks_per_node. An even split asks for tasks per
        # node: with only a task count, Slurm packs the ranks (P=4 on 2 nodes of 4 CPUs: 3+1).
        tasks=lambda w: _tasks(CAMPAIGN.runs[w.run]),
        tasks_per_node=lambda w: _per_node(CAMPAIGN.runs[w.run]),
        nodes=lambda w: 1 if CAMPAIGN.runs[w.run].platform else CAMPAIGN.runs[w.run].nodes,
        # a simulation's memory grows with P and the size (docs/simulation.md); 0: the site's default
        mem_mb=lambda w: CAMPAIGN.memory_mb(CAMPAIGN.runs[w.run]),
        cpus_per_task=1,
        runtime=CAMPAIGN.walltime_minutes(),
    shell:
        "{params.python:q} -m harness.cli exec {input.spec:q} --timeout {params.walltime}"
