# Stage 6: tuned selection (harness/campaign/tune.py, harness/campaign/tune_verify.py), with `tune.enabled`.
# After the summary and the confirmation stage: each library's BEST written as its own
# tuning file, then AUTO vs the library following that file measured in fresh interleaved
# launches at the measured and held-out points; then the tuned table and figures.

TUNE_LIBS = CAMPAIGN.tune_libraries()

localrules: tune, report_tuned

rule tune:
    input:
        RES + "/summary.csv",
        expand(RES + "/confirm/{group}.json", group=sorted(CONFIRM_GROUPS)),
    output:
        expand(RES + "/tuning/{library}.json", library=TUNE_LIBS),
        RES + "/tuning/decisions.csv",
    run:
        from harness import paths
        from harness.campaign.tune import TuneError, tune

        try:
            tune(paths.results_root(), CAMPAIGN.cfg.campaign, statistic=STATISTIC)
        except TuneError as exc:
            raise WorkflowError(f"harness tune {CAMPAIGN.cfg.campaign}: {exc}") from None


rule verify_tuned:
    input:
        RES + "/tuning/{library}.json",
    output:
        RES + "/tuning/verify-{library}.json",
    threads: workflow.cores
    resources:
        mpi="srun",
        tasks=max(CAMPAIGN.runs[r].procs for r in CAMPAIGN.runs) if CAMPAIGN.runs else 1,
        cpus_per_task=1,
        runtime=CAMPAIGN.walltime_minutes(),
    run:
        from harness.campaign.tune_verify import run_library

        run_library(CAMPAIGN, wildcards.library, output[0])


rule report_tuned:
    input:
        expand(RES + "/tuning/verify-{library}.json", library=TUNE_LIBS),
    output:
        REPORTS["tuned"].outputs(RES + "/tables", FIG, FACTS),
    run:
        REPORTS["tuned"].write(report_inputs(REPORTS["tuned"], documents=list(input)))
