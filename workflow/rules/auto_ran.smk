# Stage 2b: what AUTO ran. One launch per group of AUTO cells (installation, P, nodes, dtype,
# op) with rank 0 under gdb, one allreduce per size (harness/campaign/auto_ran.py,
# harness/measure/whatran.py); the summary's auto_ran column is filled from its documents.
# Off with auto_ran: {enabled: false}.

AUTO_RAN = CAMPAIGN.auto_ran_groups()
AUTO_RAN_OUTPUTS = [RES + f"/auto_ran/{g}.json" for g in AUTO_RAN]

localrules: auto_ran_spec


rule auto_ran_spec:
    output:
        RES + "/auto_ran/{autogroup}.spec.json",
    wildcard_constraints:
        autogroup="[A-Za-z0-9_-]+",
    params:
        spec=lambda w: json.dumps(AUTO_RAN[w.autogroup], sort_keys=True),
    run:
        from harness import fileio
        from harness.campaign.auto_ran import spec

        fileio.write_json(output[0], spec(CAMPAIGN.cfg, AUTO_RAN[wildcards.autogroup]))


rule auto_ran:
    input:
        spec=RES + "/auto_ran/{autogroup}.spec.json",
        installations=PREFLIGHT_OUTPUTS,  # workflow/rules/preflight.smk
    output:
        RES + "/auto_ran/{autogroup}.json",
    wildcard_constraints:
        autogroup="[A-Za-z0-9_-]+",
    params:
        python=sys.executable,
    threads: workflow.cores
    resources:
        mpi="srun",
        tasks=lambda w: AUTO_RAN[w.autogroup]["procs"],
        nodes=lambda w: AUTO_RAN[w.autogroup]["nodes"],
        cpus_per_task=1,
        runtime=15,
    shell:
        "{params.python:q} -m harness.campaign.auto_ran {input.spec:q} {output:q}"
