# Stage 1: one job script per run, rendered from slurm_templates/run.sh.j2.

localrules: jobscript

rule jobscript:
    output:
        script=RES + "/jobs/{run}.sh",
        spec=RES + "/jobs/{run}.json",
    params:
        fingerprint=lambda w: CAMPAIGN.fingerprint(w.run),
    run:
        CAMPAIGN.render(wildcards.run)
