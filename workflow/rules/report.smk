# Stage 4: the paper-style tables and figures, from summary.csv alone.

from harness.report.suara import OUTPUT_FIGURES as SUARA_FIGURES, OUTPUT_TABLES as SUARA_TABLES

localrules: report, report_suara, report_node_aware, report_pap, report_workload, report_cross_library

# AUTO vs BEST needs native cells: only libraries that have some get its figure
NATIVE_LIBRARIES = sorted({r.library for r in CAMPAIGN.runs.values()
                           if any(c.algorithm.startswith("native:")
                                  and not dict(c.params).get("workload") for c in r.cells)})
# RD vs SMP vs NAP (Bienz et al., Figs. 12-15) when the campaign runs NAP or SMP
NODE_AWARE = any(c.algorithm in ("nap", "smp") for r in CAMPAIGN.runs.values() for c in r.cells)
# ... and Bienz et al., Fig. 1 (node_aware_fig1) when some AUTO cell reduces one double (8 B)
NODE_AWARE = NODE_AWARE or any(c.algorithm == "native:auto" and c.size == 8 and c.dtype == "float64"
                               and not dict(c.params).get("workload") for r in CAMPAIGN.runs.values() for c in r.cells)
# SUARA tables and figures (Nuriyev et al., Figs. 7-8) when the campaign runs SUARA2
SUARA = any(c.algorithm == "suara2" for r in CAMPAIGN.runs.values() for c in r.cells)
# PAP Tables 3-4 and Figs. 10-12 when some cell runs the PAP benchmark's compute phase
HAS_PAP = any("compute" in dict(c.params) for r in CAMPAIGN.runs.values() for c in r.cells)

rule report:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/auto_vs_best.{ext}", ext=["md", "tex", "csv"]),
        expand(FIG + "/auto_vs_best_{library}.{ext}", library=NATIVE_LIBRARIES,
               ext=["png", "pdf"]),
    run:
        from harness.report.figures import make_all

        make_all(input[0], RES + "/tables", FIG, libraries=NATIVE_LIBRARIES)


rule report_suara:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/{name}.{ext}", name=SUARA_TABLES, ext=["md", "tex", "csv"]),
        expand(FIG + "/{name}.{ext}", name=SUARA_FIGURES, ext=["png", "pdf"]),
    run:
        from harness.report.suara import make_suara

        make_suara(input[0], RES + "/tables", FIG)


rule report_node_aware:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/node_aware_{name}.{ext}", name=["counts", "times", "fig1"],
               ext=["md", "tex", "csv"]),
        expand(FIG + "/node_aware_{name}.{ext}", name=["vs_procs", "vs_size", "model", "fig1"],
               ext=["png", "pdf"]),
    run:
        from harness.report.node_aware import make_all

        make_all(input[0], RES + "/tables", FIG)


# The PAP paper's Tables 3-4 and Figs. 10-12 (harness/report/pap.py), when the campaign has
# PAP cells (a `compute` parameter); `rule all` asks for them only then.
rule report_pap:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/pap_table{n}.{ext}", n=[3, 4], ext=["md", "tex", "csv"]),
        expand(FIG + "/pap_fig{n}.{ext}", n=[10, 11, 12], ext=["png", "pdf"]),
    run:
        from harness.report.pap import make_pap

        make_pap(input[0], RES + "/tables", FIG)


# Ping-pong and local reduction (Castelló et al., Fig. 4; Bienz et al., Fig. 5): one-way time
# and bandwidth per library, level and concurrent pairs (harness/report/pingpong.py), when the
# campaign has pingpong or reduce_local cells; `rule all` asks for them only then.
HAS_PINGPONG = any(c.algorithm in ("pingpong", "reduce_local")
                   for r in CAMPAIGN.runs.values() for c in r.cells)

localrules: report_pingpong

rule report_pingpong:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/pingpong.{ext}", ext=["md", "tex", "csv"]),
        expand(FIG + "/pingpong_fig4.{ext}", ext=["png", "pdf"]),
    run:
        from harness.report.pingpong import make_all

        make_all(input[0], RES + "/tables", FIG)


# Training-iteration workloads (Castelló et al., Sect. 5): Figs. 9-10 from the workload cells,
# and Fig. 7 (gradient sizes per model) of the models they replay; when the campaign has some.
WORKLOAD_MODELS = sorted({dict(c.params)["workload"] for r in CAMPAIGN.runs.values()
                          for c in r.cells if dict(c.params).get("workload")})

rule report_workload:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/{name}.{ext}", name=["workload", "workload_normalised",
               "dnn_models"], ext=["md", "tex", "csv"]),
        expand(FIG + "/{name}.{ext}", name=["workload_fig9", "workload_fig10",
               "dnn_fig7"], ext=["png", "pdf"]),
    run:
        from harness.report.dnn_traces import make_fig7
        from harness.report.workload import make_all

        make_all(input[0], RES + "/tables", FIG)
        make_fig7(WORKLOAD_MODELS, RES + "/tables", FIG)


# Every library's AUTO and BEST on one set of axes and over the reference library's AUTO
# (Castelló et al., Fig. 6 and Fig. 10 right), when at least two libraries have native cells;
# the reference is the config's report.reference_library (harness/report/cross_library.py).
CROSS_LIBRARY = len(NATIVE_LIBRARIES) >= 2

rule report_cross_library:
    input:
        RES + "/summary.csv",
    output:
        expand(RES + "/tables/cross_library.{ext}", ext=["md", "tex", "csv"]),
        expand(FIG + "/{name}.{ext}", name=["cross_library", "cross_library_normalised"],
               ext=["png", "pdf"]),
    params:
        reference=CAMPAIGN.cfg.report["reference_library"],
    run:
        from harness.report.cross_library import make_all

        make_all(input[0], RES + "/tables", FIG, reference=params.reference)


# Model projection past the cluster (harness/report/projection.py): SUARA2 against the best
# single algorithm and RD/SMP/NAP up to P = 16384, with the campaign's model_params.json when
# it exists (else the papers' parameters), the measured region outlined; when the campaign has
# SUARA2 or node-aware cells.
from pathlib import Path

PROJECTION = SUARA or NODE_AWARE

localrules: report_projection

rule report_projection:
    input:
        RES + "/summary.csv",
        lambda w: [p for p in [RES + "/model_params.json"] if Path(p).is_file()],
    output:
        expand(RES + "/tables/projection.{ext}", ext=["md", "tex", "csv"]),
        expand(FIG + "/{name}.{ext}", name=["projection_suara", "projection_node_aware"],
               ext=["png", "pdf"]),
    run:
        from harness.report.projection import make_projection

        make_projection(input[0], RES + "/tables", FIG)
