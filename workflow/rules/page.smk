# Stage 6: the campaign's report page (harness/report/page.py), results/<c>/report/index.html:
# one self-contained HTML file that reads like a paper: contents, the campaign, its findings,
# then per report what it reproduces, its claims, its figures and its tables, the cells by
# status per experiment, and a sortable table of the cells.

localrules: report_page

# Every table and figure the campaign's reports write (harness/report/registry.py): what the
# page shows, and (with the page) what `rule all` in the Snakefile asks for.
REPORT_OUTPUTS = [RES + "/summary.csv"] + ([RES + "/model_params.json"] if FACTS.pingpong else [])
REPORT_OUTPUTS += [path for report in REPORTS.values() if report.on_page and report.applies(FACTS)
                   for path in report.outputs(RES + "/tables", FIG, FACTS)]

rule report_page:
    input:
        REPORT_OUTPUTS,
    output:
        RES + "/report/index.html",
    run:
        make_page = serial_import("harness.report.page").make_page

        given = [str(p) for p in (workflow.overwrite_configfiles or [])]
        make_page(Inputs.load(RES, RES + "/tables", FIG, statistic=STATISTIC), output[0],
                  config=f"{CAMPAIGN.cfg.source} (hash {CAMPAIGN.cfg.digest})",
                  configfile=given[-1] if given else None)
