# Stage 4b: network parameters from the ping-pong and reduce_local cells
# (harness/analysis/netparams.py): rule fit_params -> results/<c>/model_params.json (the file
# `harness fit` writes), when the campaign has pingpong cells. The theory-vs-measurement report
# that reads it (rule report_castello_models, harness/report/castello_models.py) is one of
# report.smk's rules.

localrules: fit_params

rule fit_params:
    input:
        RES + "/summary.csv",
    output:
        RES + "/model_params.json",
    run:
        netparams = serial_import("harness.analysis.netparams")

        try:
            doc = netparams.write(input[0], output[0], campaign=CAMPAIGN.cfg.campaign)
        except ValueError as exc:
            raise WorkflowError(f"fit_params: {exc}") from None
        for lib, f in doc.get("pingpong", {}).items():
            print(f"{lib}: alpha {f['alpha']:.3g} s, beta {f['beta']:.3g} s/B "
                  f"(level {f['level']}, R^2 {f['r2']:.4f}, n {f['n']})")
