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


# The PAP paper's Tables 3-4 and Figs. 10-12 (harness/report/pap.py), when the campaign has
# PAP cells (a `compute` parameter); `rule all` asks for them only then.
localrules: report_pap

rule report_pap:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/pap_table{n}.{ext}", n=[3, 4], ext=["md", "tex", "csv"]),
        expand(FIG + "/pap_fig{n}.{ext}", n=[10, 11, 12], ext=["png", "pdf"]),
    run:
        from harness.report.pap import make_pap

        make_pap(input[0], RES + "/tables", FIG)
