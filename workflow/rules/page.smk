# Stage 6: the campaign's report page (harness/report/page.py), results/<c>/report/index.html:
# one self-contained HTML file with the provenance, the cells by status, every table and
# figure of the stages above with its caption, and a sortable table of the cells.

localrules: report_page

# Every table and figure the campaign's reports write: what the page shows, and (with the
# page) what `rule all` in the Snakefile asks for. One list: a report added to it is built and
# shown.
REPORT_OUTPUTS = [
    RES + "/summary.csv",
    rules.report.output,
    rules.report_suara.output if SUARA else [],
    rules.report_node_aware.output if NODE_AWARE else [],
    rules.report_pap.output if HAS_PAP else [],
    rules.report_pingpong.output if HAS_PINGPONG else [],
    rules.report_workload.output if WORKLOAD_MODELS else [],
    rules.report_cross_library.output if CROSS_LIBRARY else [],
    rules.report_confirm.output if CONFIRM_GROUPS else [],
    rules.report_tuned.output if TUNE_LIBS else [],
    PARAMS_OUTPUTS,
    rules.report_projection.output if PROJECTION else [],
]

rule report_page:
    input:
        REPORT_OUTPUTS,
    output:
        RES + "/report/index.html",
    run:
        from harness.report.page import make_page

        given = [str(p) for p in (workflow.overwrite_configfiles or [])]
        make_page(CAMPAIGN, output[0], RES + "/tables", FIG,
                  configfile=given[-1] if given else None)
