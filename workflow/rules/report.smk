# Stage 4: the paper-style tables and figures, from summary.csv alone.

localrules: report

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
