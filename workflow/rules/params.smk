# Stage 4b: network parameters from the ping-pong and reduce_local cells (harness/netparams.py)
# and the theory-vs-measurement reports that use them (harness/report/castello_models.py):
#   fit_params             -> results/<c>/model_params.json (the file `harness fit` writes)
#   report_castello_models -> tables/castello_models.*, tables/network_params.*,
#                             figures/<c>/castello_fig{1,2,3}.*, maxrate_fig5.*
# Both only when the campaign has pingpong cells; `rule all` asks for PARAMS_OUTPUTS. Figs. 2-3
# need native allreduce cells too (a placeholder says so when there are none).

from harness.report.castello_models import (OUTPUT_FIGURES as CASTELLO_FIGURES,
                                            OUTPUT_TABLES as CASTELLO_TABLES)

localrules: fit_params, report_castello_models

PINGPONG = any(c.algorithm == "pingpong" for r in CAMPAIGN.runs.values() for c in r.cells)

rule fit_params:
    input:
        RES + "/summary.csv",
    output:
        RES + "/model_params.json",
    run:
        from harness import netparams

        try:
            doc = netparams.write(input[0], output[0], campaign=CAMPAIGN.cfg.campaign)
        except ValueError as exc:
            raise WorkflowError(f"fit_params: {exc}") from None
        for lib, f in doc.get("pingpong", {}).items():
            print(f"{lib}: alpha {f['alpha']:.3g} s, beta {f['beta']:.3g} s/B "
                  f"(level {f['level']}, R^2 {f['r2']:.4f}, n {f['n']})")


rule report_castello_models:
    input:
        RES + "/summary.csv",
        RES + "/model_params.json",
    output:
        expand(RES + "/tables/{name}.{ext}", name=CASTELLO_TABLES, ext=["md", "tex", "csv"]),
        expand(FIG + "/{name}.{ext}", name=CASTELLO_FIGURES, ext=["png", "pdf"]),
    run:
        from harness.report.castello_models import make_all

        make_all(input[0], RES + "/tables", FIG, params_json=input[1])


PARAMS_OUTPUTS = ([RES + "/model_params.json", rules.report_castello_models.output]
                  if PINGPONG else [])
