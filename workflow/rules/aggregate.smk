# Stage 3: one summary row per cell of the campaign, from the run documents.

localrules: aggregate

rule aggregate:
    input:
        expand(RES + "/runs/{run}.json", run=sorted(CAMPAIGN.runs)),
    output:
        RES + "/summary.csv",
    run:
        from harness.results import rebuild_summary

        rebuild_summary(CAMPAIGN.store, keep=CAMPAIGN.cell_ids, runs=set(CAMPAIGN.runs))
