# Stage 4: the paper-style tables and figures, from summary.csv alone.

from harness.report.suara import OUTPUT_FIGURES as SUARA_FIGURES, OUTPUT_TABLES as SUARA_TABLES

localrules: report, report_suara

rule report:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/auto_vs_best.{ext}", ext=["md", "tex", "csv"]),
        expand(FIG + "/auto_vs_best_{library}.{ext}", library=CAMPAIGN.libraries,
               ext=["png", "pdf"]),
    run:
        from harness.report.figures import make_all

        make_all(input[0], RES + "/tables", FIG)


rule report_suara:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/{name}.{ext}", name=SUARA_TABLES, ext=["md", "tex", "csv"]),
        expand(FIG + "/{name}.{ext}", name=SUARA_FIGURES, ext=["png", "pdf"]),
    run:
        from harness.report.suara import make_suara

        make_suara(input[0], RES + "/tables", FIG)
