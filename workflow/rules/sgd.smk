# Stage 7: distributed SGD of the PAP paper's CNN (config key `sgd:`), trained for real with
# the harness's allreduce algorithms, and its Table 5 (harness/campaign/sgd_stage.py, harness/measure/sgd.py, docs/sgd.md).
#
#   sgd_jobscript  (local)  results/<c>/sgd/<exp>/jobs/<alg>-<k>.{json,sh}: spec + job script
#   sgd_train               results/<c>/sgd/<exp>/<alg>-<k>.json: one MPI launch (mpiexec, or
#                           srun with `launch: srun` / --profile slurm), one Slurm job each
#   report_sgd     (local)  results/<c>/tables/sgd_<exp>.{md,tex,csv}, figures/<c>/sgd_<exp>_loss.*
#
# The executions of an experiment run one after another in the interleaved order
# ring slt prr prr slt ring ring ... (harness.campaign.sgd_stage.launch_order): each one's input is the
# document of the one before it. A failed or wrong execution stops its experiment's chain;
# the finished ones are kept and a rerun continues after them.
import json
import sys

from harness.campaign.sgd_stage import execution_name as _sgd_name
from harness.campaign.sgd_stage import launch_order as _sgd_order

SGD = CAMPAIGN.cfg.sgd or {}  # checked with the config (harness.campaign.config.sgd_experiment)

localrules: sgd_jobscript, report_sgd


def _sgd_execution(experiment, algorithm, k):
    return f"{RES}/sgd/{experiment}/{_sgd_name(algorithm, k)}.json"


def _sgd_executions(experiment):
    return [_sgd_execution(experiment, a, k) for a, k in _sgd_order(SGD[experiment])]


def _sgd_previous(w):
    order = _sgd_order(SGD[w.experiment])
    i = order.index((w.algorithm, int(w.k)))
    return [] if i == 0 else [_sgd_execution(w.experiment, *order[i - 1])]


def _sgd_per_node(w):
    e = SGD[w.experiment]
    per, rest = divmod(e["procs"], e["nodes"])
    return per if e["nodes"] > 1 and not rest and per > 1 else None


rule sgd_jobscript:
    output:
        spec=RES + "/sgd/{experiment}/jobs/{algorithm}-{k}.json",
        script=RES + "/sgd/{experiment}/jobs/{algorithm}-{k}.sh",
    wildcard_constraints:
        experiment="[A-Za-z0-9][A-Za-z0-9._-]*",
        algorithm="[a-z0-9_]+",
        k="[0-9]+",
    params:
        # a changed experiment block (or launcher) renders the script again
        settings=lambda w: json.dumps([SGD[w.experiment], CAMPAIGN.cfg.launch,
                                       CAMPAIGN.cfg.libraries.get(SGD[w.experiment]["library"])],
                                      sort_keys=True, default=str),
    run:
        from harness.campaign.sgd_stage import write_launch

        write_launch(CAMPAIGN.cfg, wildcards.experiment, wildcards.algorithm, int(wildcards.k), RES)


rule sgd_train:
    input:
        spec=RES + "/sgd/{experiment}/jobs/{algorithm}-{k}.json",
        script=RES + "/sgd/{experiment}/jobs/{algorithm}-{k}.sh",
        previous=_sgd_previous,
        installations=PREFLIGHT_OUTPUTS,  # workflow/rules/preflight.smk
    output:
        RES + "/sgd/{experiment}/{algorithm}-{k}.json",
    wildcard_constraints:
        experiment="[A-Za-z0-9][A-Za-z0-9._-]*",
        algorithm="[a-z0-9_]+",
        k="[0-9]+",
    params:
        walltime=CAMPAIGN.cfg.run_walltime,
        python=sys.executable,
    threads: workflow.cores
    resources:
        mpi="srun",
        tasks=lambda w: None if _sgd_per_node(w) else SGD[w.experiment]["procs"],
        tasks_per_node=_sgd_per_node,
        nodes=lambda w: SGD[w.experiment]["nodes"],
        cpus_per_task=1,
        runtime=CAMPAIGN.walltime_minutes(),
    shell:
        "{params.python:q} -m harness.campaign.sgd_stage --execute {input.spec:q} --timeout {params.walltime}"


rule report_sgd:
    input:
        lambda w: _sgd_executions(w.experiment),
    output:
        REPORTS["sgd"].outputs(RES + "/tables", FIG, FACTS, experiment="{experiment}"),
    wildcard_constraints:
        experiment="[A-Za-z0-9][A-Za-z0-9._-]*",
    run:
        REPORTS["sgd"].write(report_inputs(REPORTS["sgd"], documents=list(input),
                                           experiment=wildcards.experiment))


# what `rule all` asks for: nothing while the config has no `sgd:` experiment
SGD_OUTPUTS = REPORTS["sgd"].outputs(RES + "/tables", FIG, FACTS)
