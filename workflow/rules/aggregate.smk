# Stage 3: one summary row per cell of the campaign, from the run documents; then the store
# is validated (harness/results/check.py, findings in check.json). A damaged run document is rebuilt
# from its journal; an inconsistency stops the workflow here, naming the file and the remedy.
# The cells the plan found outside their algorithm's condition (not-applicable) were never
# launched: their run documents are written here, from the plan (harness/campaign/plan.py).

localrules: aggregate

rule aggregate:
    input:
        expand(RES + "/runs/{run}.json", run=sorted(CAMPAIGN.runs)),
        AUTO_RAN_OUTPUTS,  # what AUTO ran (workflow/rules/auto_ran.smk): the auto_ran column
    output:
        RES + "/summary.csv",
    params:
        # a change in the not-applicable cells (their run ids) makes a new summary
        not_applicable=sorted(CAMPAIGN.not_applicable),
    run:
        from harness.results import check
        from harness.results.store import StoreError, load_run_docs, rebuild_summary

        runs = set(CAMPAIGN.runs) | set(CAMPAIGN.not_applicable)
        for run_id in CAMPAIGN.record_not_applicable():
            print(f"run {run_id}: not-applicable cells recorded, not launched")
        try:
            # one snapshot of the run documents for the summary and its check: a second
            # workflow on this store may rewrite a document between them
            docs = load_run_docs(CAMPAIGN.store, runs=runs, log=print)
            rebuild_summary(CAMPAIGN.store, keep=CAMPAIGN.cell_ids, runs=runs, docs=docs)
        except StoreError as exc:
            raise WorkflowError(str(exc)) from None
        found = check.check_store(CAMPAIGN.store, runs=runs, keep=CAMPAIGN.cell_ids, docs=docs)
        check.write(CAMPAIGN.store, found)
        print(check.render(CAMPAIGN.store, found))
        if not found.ok:
            raise WorkflowError(f"results store {RES} is inconsistent ({len(found.problems)} "
                                f"problem(s), listed above and in {RES}/check.json)")
