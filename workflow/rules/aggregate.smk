# Stage 3: one summary row per cell of the campaign, from the run documents; then the store
# is validated (harness/results/check.py, findings in check.json). A damaged run document is rebuilt
# from its journal; an inconsistency stops the workflow here, naming the file and the remedy.

localrules: aggregate

rule aggregate:
    input:
        expand(RES + "/runs/{run}.json", run=sorted(CAMPAIGN.runs)),
    output:
        RES + "/summary.csv",
    run:
        from harness.results import check
        from harness.results.store import StoreError, load_run_docs, rebuild_summary

        runs = set(CAMPAIGN.runs)
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
