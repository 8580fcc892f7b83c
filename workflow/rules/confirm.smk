# Stage 5: the confirmation of AUTO vs BEST (harness/campaign/confirm.py). Per (library, P, nodes,
# thread level) group, after the summary exists: AUTO and BEST measured again in fresh
# launches, A B B A; finished launches are kept across interrupts. Then the confirmed table
# and figure.

CONFIRM_GROUPS = CAMPAIGN.confirm_groups()

localrules: report_confirm

rule confirm:
    input:
        RES + "/summary.csv",
    output:
        RES + "/confirm/{group}.json",
    threads: workflow.cores
    resources:
        mpi="srun",
        tasks=lambda w: CONFIRM_GROUPS[w.group][1],
        nodes=lambda w: CONFIRM_GROUPS[w.group][2],
        cpus_per_task=1,
        runtime=CAMPAIGN.walltime_minutes(),
    run:
        from harness.campaign.confirm import run_group

        run_group(CAMPAIGN, wildcards.group, output[0])


rule report_confirm:
    input:
        expand(RES + "/confirm/{group}.json", group=sorted(CONFIRM_GROUPS)),
    output:
        REPORTS["confirm"].outputs(RES + "/tables", FIG, FACTS),
    run:
        REPORTS["confirm"].write(report_inputs(REPORTS["confirm"], documents=list(input)))
