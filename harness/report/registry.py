"""Every report by name: what it reproduces, when a campaign gets it, the files it writes with
their captions, and where it reads more than the summary. One entry per report; the
workflow's report rules (``workflow/rules/report.smk``, one rule per entry, and the confirm,
tune and SGD stages' rules), the outputs `rule all` and the report page ask for
(``workflow/rules/page.smk``), the page's sections and the command line all read this list.

Every report is one function of its module, ``make(inputs) -> list[Path]``: ``inputs`` is
``inputs.Inputs``, the campaign's typed summary loaded once, its model parameters, the tables
and figures directories, the store and the options. The module is imported only when the
report is written (they import matplotlib). Adding a report is one entry here and one
``make`` there.

    python -m harness.report NAME --store results/<c> [options]     (``__main__.py``)
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from ..analysis.guidelines import MOCK_UPS
from .inputs import Inputs

TABLE_FORMATS = ("md", "tex", "csv", "html")
FIGURE_FORMATS = ("png", "pdf")


_IMPORTING = threading.Lock()


def serial_import(module: str):
    """``importlib.import_module(module)``, one at a time in this process, matplotlib first.
    Snakemake runs local rules' ``run:`` blocks as threads of its own process: two report
    rules importing matplotlib at once left one of them with a half-initialised module
    (``module 'matplotlib' has no attribute 'get_data_path'``, a CI run of the Slurm paper
    campaign)."""
    with _IMPORTING:
        import matplotlib.pyplot  # noqa: F401

        return importlib.import_module(module)


@dataclass(frozen=True)
class Facts:
    """What a campaign holds that decides which reports it gets and which files they write:
    read from its runs (``harness.cells.Run``) and its stages' settings."""
    native_libraries: tuple[str, ...] = ()  # libraries with native cells (not workloads)
    node_aware: bool = False  # NAP or SMP cells, or an AUTO cell of one double (Bienz Fig. 1)
    suara: bool = False  # SUARA2 cells
    pap: bool = False  # cells with the PAP benchmark's compute phase
    pingpong: bool = False  # ping-pong cells: network parameters and the models' reports
    pingpong_or_local: bool = False  # ping-pong or local-reduction cells
    guidelines: bool = False  # AUTO and a performance-guideline mock-up
    workload_models: tuple[str, ...] = ()  # the models of the workload cells
    confirm_groups: tuple[str, ...] = ()  # the confirmation stage's groups
    tune_libraries: tuple[str, ...] = ()  # the libraries the tuning stage covers
    sgd_experiments: tuple[str, ...] = ()  # the `sgd:` experiments
    auto_ran: bool = False  # the auto_ran stage sees what AUTO ran (AUTO cells, stage enabled)

    @classmethod
    def of(cls, runs: Iterable, confirm_groups=(), tune_libraries=(), sgd_experiments=(),
           auto_ran=False):
        pairs = [(r.library, c, dict(c.params)) for r in runs for c in r.cells]
        allreduce = [(lib, c) for lib, c, _ in pairs if c.kind != "workload"]
        algorithms = {c.algorithm for _, c, _ in pairs}
        return cls(
            native_libraries=tuple(sorted({lib for lib, c in allreduce if c.kind == "native"})),
            node_aware=bool({"nap", "smp"} & algorithms) or any(
                c.algorithm == "native:auto" and c.size == 8 and c.dtype == "float64"
                for _, c in allreduce),
            suara="suara2" in algorithms,
            pap=any("compute" in p for _, _, p in pairs),
            pingpong="pingpong" in algorithms,
            pingpong_or_local=any(c.kind == "probe" for _, c, _ in pairs),
            guidelines=bool(set(MOCK_UPS) & algorithms) and "native:auto" in algorithms,
            workload_models=tuple(sorted({p["workload"] for _, c, p in pairs
                                          if c.kind == "workload"})),
            confirm_groups=tuple(sorted(confirm_groups)),
            tune_libraries=tuple(tune_libraries),
            sgd_experiments=tuple(sgd_experiments), auto_ran=bool(auto_ran))


Caption = tuple[str, str, str]  # (paper, what it reproduces, how to read it)


@dataclass(frozen=True)
class Report:
    name: str
    module: str  # harness.report.<module>, whose make(inputs) writes it
    about: str  # what it reproduces: paper, tables and figures
    tables: tuple[str, ...] = ()  # file stems under tables/ ({library}, {experiment} expand)
    figures: tuple[str, ...] = ()  # file stems under figures/<c>/
    captions: dict[str, Caption] = field(default_factory=dict)  # stem (or prefix_*) -> caption
    applies: Callable[[Facts], bool] = lambda facts: True  # does a campaign get it
    rule: str = ""  # its workflow rule (report_<name> unless named)
    on_page: bool = True  # the report page waits for it (`rule all` asks for it either way)
    params: str = ""  # model_params.json: "required" (an input), "if_fitted" (an input when
    #                   the campaign fits it: ping-pong cells), "optional" (when it exists)
    reads: str = ""  # the stage documents it reads under the store, instead of the summary
    #                  alone (its rule is its stage's: confirm.smk, tune.smk, sgd.smk)
    options: Callable[[Facts, dict], dict] = lambda facts, report: {}  # Inputs' options,
    #                                         from the facts and the config's `report:` block

    @property
    def rule_name(self) -> str:
        return self.rule or f"report_{self.name}"

    def load(self) -> Callable[[Inputs], list[Path]]:
        """The report's ``make(inputs)``."""
        return serial_import(f"harness.report.{self.module}").make

    def write(self, inputs: Inputs) -> list[Path]:
        return list(self.load()(inputs))

    def stems(self, names, facts: Facts, experiment: str | None = None) -> list[str]:
        """``names`` (its tables or figures) for a campaign with these facts; ``experiment``
        (the SGD report's wildcard) fills ``{experiment}`` instead of every SGD experiment."""
        out = []
        for name in names:
            if "{library}" in name:
                libs = facts.tune_libraries if self.name == "tuned" else facts.native_libraries
                out += [name.format(library=lib) for lib in libs]
            elif "{experiment}" in name:
                exps = [experiment] if experiment else facts.sgd_experiments
                out += [name.replace("{experiment}", e) for e in exps]
            else:
                out.append(name)
        return out

    def outputs(self, tables_dir: str, figures_dir: str, facts: Facts,
                experiment: str | None = None) -> list[str]:
        """The files the report writes for a campaign with these facts."""
        return ([f"{tables_dir}/{s}.{e}" for s in self.stems(self.tables, facts, experiment)
                 for e in TABLE_FORMATS]
                + [f"{figures_dir}/{s}.{e}" for s in self.stems(self.figures, facts, experiment)
                   for e in FIGURE_FORMATS])

    def owns(self, stem: str, exact: bool) -> bool:
        """Is ``stem`` one of its files (``exact``: by name, else by pattern)?"""
        names = self.tables + self.figures
        if exact:
            return stem in names
        return any(fnmatchcase(stem, _glob(n) + ("*" if n in self.figures else "")) for n in names)


def _glob(stem: str) -> str:
    return stem.replace("{library}", "*").replace("{experiment}", "*")


REPORTS = {r.name: r for r in (
    Report("auto_vs_best", "figures",
           "AUTO vs BEST table and per-library throughput figures (Castelló et al., Sec. 4.3, "
           "Figs. 5-6)",
           tables=("auto_vs_best",), figures=("auto_vs_best_{library}",), rule="report",
           params="if_fitted",
           options=lambda facts, report: {"libraries": list(facts.native_libraries)},
           captions={
            "auto_vs_best": ("Castelló et al.", "AUTO vs BEST (Sec. 4.3)",
                             "per library, P and size: AUTO's time, the fastest native algorithm and the "
                             "gain; (tie) where the 95% CIs overlap, ‡ oversubscribed"),
            "auto_vs_best_*": ("Castelló et al.", "Figs. 5-6: throughput of every native algorithm",
                               "top: MiB/s against message size, AUTO thick black, BEST ringed and named; "
                               "bottom: gain AUTO/BEST, empty bar = tie, hatched = oversubscribed"),
           }),
    Report("bound", "bound",
           "every timed allreduce cell against its lower bound (Chan et al. 2007)",
           tables=("bound",), applies=lambda facts: facts.pingpong, params="required",
           captions={
            "bound": ("Chan et al. 2007", "how far each algorithm sits from the lower bound",
                      "per installation, P and algorithm: time / bound over the sizes (median, "
                      "smallest, largest); the CSV has every cell's bound and bound_ratio"),
           }),
    Report("auto_choices", "auto_choices",
           "what AUTO ran in each cell: the library's own choice, seen under gdb (harness whatran)",
           tables=("auto_choices",), figures=("auto_choices",),
           applies=lambda facts: facts.auto_ran,
           captions={
            "auto_choices": ("Castelló et al.", "AUTO's selection map: why AUTO is not BEST",
                             "per installation, P and size the algorithm AUTO ran (read from the "
                             "library's functions under gdb), its time, and BEST where BEST is "
                             "another algorithm"),
           }),
    Report("confirm", "confirm",
           "AUTO vs BEST, and the guideline violations, confirmed in fresh A B B A launches, "
           "from confirm/<group>.json",
           tables=("auto_vs_best_confirmed", "guidelines_confirmed"),
           figures=("auto_vs_best_confirmed",),
           applies=lambda facts: bool(facts.confirm_groups), reads="confirm/*.json",
           captions={
            "auto_vs_best_confirmed": ("Castelló et al.", "AUTO vs BEST, confirmed in fresh launches",
                                       "gain t_AUTO/t_BEST from alternating launches (A B B A) with its "
                                       "95% CI; the verdict says whether BEST really wins"),
            "guidelines_confirmed": ("performance guidelines", "violations measured again",
                                     "each violation of the campaign, AUTO and the mock-up in fresh "
                                     "alternating launches: speedup t_AUTO/t_mock-up with its 95% CI"),
           }),
    Report("tuned", "tuned",
           "AUTO vs each library following the campaign's tuning file, from "
           "tuning/verify-<library>.json",
           tables=("tuned",), figures=("tuned_{library}",),
           applies=lambda facts: bool(facts.tune_libraries), reads="tuning/verify-*.json",
           options=lambda facts, report: {"libraries": list(facts.tune_libraries)},
           captions={
            "tuned": ("tuned selection", "AUTO vs each library following the campaign's tuning file",
                      "fresh interleaved launches at measured and held-out points: gain AUTO/tuned, "
                      "tuned/BEST and Intel MPI's autotuner against tuned, each with its 95% CI"),
            "tuned_*": ("tuned selection", "time against message size, AUTO vs tuned",
                        "per P: AUTO black, tuned red, BEST stars, Intel MPI's autotuner violet; "
                        "hollow markers are held-out points"),
           }),
    Report("castello_models", "castello_models",
           "Castelló et al. Table 1's models against measurement, Bienz et al. Fig. 5",
           tables=("castello_models", "network_params"),
           figures=("castello_fig1", "castello_fig2", "castello_fig3", "maxrate_fig5"),
           applies=lambda facts: facts.pingpong, params="required",
           captions={
            "network_params": ("Castelló et al.", "network parameters from ping-pong (Sect. 4, Fig. 4)",
                               "Hockney alpha and beta per library from one-pair ping-pong, gamma from "
                               "local reductions, the max-rate values, beside Castelló et al.'s and "
                               "SUARA Table 4's"),
            "castello_models": ("Castelló et al.", "Table 1 against measurement (Sect. 3.4)",
                                "per library, P, algorithm and size: measured MiB/s (REAL) beside the "
                                "Table 1 model (THEO), fully overlapped (OVL) and not overlapped (NOVL), "
                                "all with the ping-pong parameters"),
            "castello_fig1": ("Castelló et al.", "Fig. 1: Table 1 throughput against size, p, bandwidth "
                              "and arithmetic rate",
                              "MiB/s = n/THEO of RDB, RSA, LIN, RNG, SRG with the paper's alpha, beta, "
                              "gamma (solid) and this machine's ping-pong fit (dashed)"),
            "castello_fig2": ("Castelló et al.", "Fig. 2: theoretical (-T) against real throughput",
                              "per P: MiB/s of RDB, RSA, LIN, RNG, SRG measured (solid) and modelled "
                              "with the ping-pong parameters (dashed); higher is better"),
            "castello_fig3": ("Castelló et al.", "Fig. 3: THEO, REAL, OVL and NOVL for RSA and RNG",
                              "REAL below THEO and near NOVL: the overlap of sends and receives the "
                              "model assumes does not happen"),
            "maxrate_fig5": ("Bienz et al.", "Fig. 5: max-rate cost of one message",
                             "modelled time per level (socket, node, network at ppn 1, 2, 4, ...) from "
                             "the fitted parameters, with the measured ping-pong points"),
           }),
    Report("cross_library", "cross_library",
           "the libraries side by side, normalised to a reference library",
           tables=("cross_library",), figures=("cross_library", "cross_library_normalised"),
           applies=lambda facts: len(facts.native_libraries) >= 2,
           options=lambda facts, report: {"reference": report["reference_library"]},
           captions={
            "cross_library": ("Castelló et al.", "Fig. 6: every library's AUTO and BEST; Fig. 10 "
                              "(right) as a table",
                              "figure: MiB/s = size/time against size, a colour per library, AUTO solid, "
                              "BEST dashed; table: times and speedup over the reference library's AUTO, "
                              "bold where the 95% CIs do not overlap"),
            "cross_library_normalised": ("Castelló et al.", "Fig. 10 (right): over the reference "
                                         "library's AUTO",
                                         "per size, each library's AUTO (hatched) and BEST (solid) as "
                                         "reference AUTO time / time; above the line at 1 is faster"),
           }),
    Report("suara", "suara", "SUARA2 / SUARA-L tables and figures (Nuriyev et al.)",
           tables=("suara_choice", "model_vs_measured", "fitted_params", "suara_agreement"),
           figures=("suara_speedup", "suara_grid", "suara_agreement"),
           applies=lambda facts: facts.suara, params="optional",
           captions={
            "suara_choice": ("Nuriyev et al. (SUARA)", "SUARA2's choice per P and size",
                             "grid and combination the model picks, predicted and measured time, "
                             "against native AUTO, BEST and the 3-step decomposition"),
            "model_vs_measured": ("Nuriyev et al. (SUARA)", "Table 1 models against measurements",
                                  "each classic algorithm's measured time next to its fitted model"),
            "fitted_params": ("Nuriyev et al. (SUARA)", "Table 4: fitted Hockney parameters",
                              "alpha (latency) and beta (time per byte) per algorithm, gamma"),
            "suara_agreement": ("Nuriyev et al. (SUARA)", "Sect. 5: model pick against the measured best",
                                "36 combinations on every grid: the pick's rank, its loss or a CI tie"),
            "suara_speedup": ("Nuriyev et al. (SUARA)", "Fig. 8: speedup against P",
                              "SUARA2 over Open MPI's AUTO and BEST, with sqrt(P) and the model"),
            "suara_grid": ("Nuriyev et al. (SUARA)", "Fig. 7: time against P_c",
                           "every grid of one P; the minimum is the best grid"),
           }),
    Report("node_aware", "node_aware",
           "RD vs SMP vs NAP, message counts, the max-rate model, Fig. 1 (Bienz et al.)",
           tables=("node_aware_counts", "node_aware_times", "node_aware_fig1"),
           figures=("node_aware_vs_procs", "node_aware_vs_size", "node_aware_model",
                    "node_aware_fig1"),
           applies=lambda facts: facts.node_aware, params="optional",
           captions={
            "node_aware_counts": ("Bienz et al.", "message counts per call",
                                  "inter- and intra-node messages of one rank against the paper's step counts"),
            "node_aware_times": ("Bienz et al.", "Figs. 12-17 as a table",
                                 "RD, SMP and NAP times and NAP's speedups; MPICH's own SMP and each "
                                 "AUTO ran on the real layout (one node here): no speedup over them "
                                 "unless both ran on the same real nodes"),
            "node_aware_vs_procs": ("Bienz et al.", "Figs. 12-13 (16-17): time against P",
                                    "lower is better; hollow dashed: the libraries' own allreduce on "
                                    "the real layout, not comparable with emulated nodes"),
            "node_aware_vs_size": ("Bienz et al.", "Figs. 14-17: time against message size",
                                   "lower is better; the paper's SMP overtakes NAP above 2048 B; hollow "
                                   "dashed: the libraries' own allreduce on the real layout"),
            "node_aware_fig1": ("Bienz et al.", "Fig. 1: one double reduced by each library's AUTO "
                                "against P", "lower is better; hollow / shaded: more ranks than cores, "
                                "no claim"),
            "node_aware_model": ("Bienz et al.", "the max-rate model of RD, SMP and NAP",
                                 "modelled cost with illustrative parameters, or those fitted from the "
                                 "campaign's ping-pong (harness fit) when it has some; see the title"),
           }),
    Report("pap", "pap", "PAP Tables 3-4 and Figs. 10-12 (Proficz 2018)",
           tables=("pap_table3", "pap_table4"), figures=("pap_fig10", "pap_fig11", "pap_fig12"),
           applies=lambda facts: facts.pap,
           captions={
            "pap_table3": ("Proficz (PAP)", "Table 3: speedup over the ring",
                           "bold where the CIs do not overlap; ≈ a tie"),
            "pap_table4": ("Proficz (PAP)", "Table 4: difference to the ring", "negative is faster"),
            "pap_fig10": ("Proficz (PAP)", "Fig. 10: time against max delay, one late process",
                          "lower is better"),
            "pap_fig11": ("Proficz (PAP)", "Fig. 11: time against max delay, random delays",
                          "lower is better"),
            "pap_fig12": ("Proficz (PAP)", "Fig. 12: time against P", "lower is better"),
           }),
    Report("workload", "workload",
           "training-iteration workloads: AUTO vs BEST, images/s (Castelló et al., Figs. 9-10), "
           "and Fig. 7, the gradient sizes of the models they replay",
           tables=("workload", "workload_normalised", "dnn_models"),
           figures=("workload_fig9", "workload_fig10", "dnn_fig7"),
           applies=lambda facts: bool(facts.workload_models),
           options=lambda facts, report: {"models": list(facts.workload_models)},
           captions={
            "workload": ("Castelló et al., Sect. 5", "training iteration: AUTO vs BEST",
                         "one iteration's fused gradient calls back to back; projected images/s"),
            "workload_normalised": ("Castelló et al., Sect. 5", "Fig. 10 (right) as a table",
                                    "images/s over the reference library's AUTO"),
            "workload_fig9": ("Castelló et al., Sect. 5", "Fig. 9: images/s with AUTO and BEST",
                                "projected from the measured iteration communication; higher is better"),
            "workload_fig10": ("Castelló et al., Sect. 5", "Fig. 10: normalised images/s",
                                        "left: BEST over the library's own AUTO; right: over the "
                                        "reference library's AUTO"),
            "dnn_models": ("Castelló et al., Sect. 5", "Fig. 7 as a table: the models' gradients",
                           "tensors, parameters against the published count, allreduce calls per "
                           "iteration under each fusion policy"),
            "dnn_fig7": ("Castelló et al., Sect. 5", "Fig. 7: message sizes and counts per model",
                         "one gradient tensor per message before fusion"),
           }),
    Report("pingpong", "pingpong", "ping-pong and local-reduction fits",
           tables=("pingpong",), figures=("pingpong_fig4",),
           applies=lambda facts: facts.pingpong_or_local,
           captions={
            "pingpong": ("Castelló et al.; Bienz et al.", "Fig. 4: ping-pong one-way time and bandwidth",
                         "round trip / 2 per library, pair level (socket, node, network) and k "
                         "concurrent pairs; local reduction time and bytes/s (gamma)"),
            "pingpong_fig4": ("Castelló et al.", "Fig. 4: ping-pong bandwidth",
                              "left: one pair, size / one-way time per library and level; right: "
                              "per-pair bandwidth per k concurrent pairs, or the local reduction's "
                              "bytes/s"),
           }),
    Report("guidelines", "guidelines",
           "performance guidelines: AUTO against Reduce + Bcast, Reduce_scatter + Allgather and "
           "two half Allreduces of the same library (Hunold's PGChecker)",
           tables=("guidelines",), figures=("guidelines",),
           applies=lambda facts: facts.guidelines,
           captions={
               "guidelines": ("performance guidelines", "AUTO against mock-ups of the "
                              "library's own collectives",
                              "speedup t_AUTO / t_mock-up per library, P and size; a violation "
                              "(mock-up faster, 95% CIs apart) is a performance bug of the "
                              "library's selection; filled markers in the figure"),
           }),
    Report("projection", "projection",
           "the models' projection past the cluster, up to P = 16,384",
           tables=("projection",), figures=("projection_suara", "projection_node_aware"),
           applies=lambda facts: facts.suara or facts.node_aware, params="optional",
           captions={
            "projection": ("model projection", "predicted winners up to P = 16384, as a table",
                           "models only: SUARA2 vs the best single Open MPI algorithm and RD/SMP/NAP "
                           "at ppn 16, predicted times and speedups; the parameters are named"),
            "projection_suara": ("model projection", "Nuriyev et al. Fig. 8 extended to P = 16384",
                                 "left: which wins per P and size, shade = SUARA2's speedup, box = "
                                 "measured cells; right: best grid's speedup against P with a sqrt(P) fit"),
            "projection_node_aware": ("model projection", "Bienz et al. Figs. 10-11 extended",
                                      "per ppn, the fastest of RD, SMP and NAP, shade = speedup over "
                                      "RD, box = measured cells; below, 8 B against P and cost against size"),
           }),
    Report("sgd", "sgd",
           "Table 5 of the distributed SGD (Proficz 2018) from its executions' documents",
           tables=("sgd_{experiment}",), figures=("sgd_{experiment}_loss",),
           applies=lambda facts: bool(facts.sgd_experiments), reads="sgd/{experiment}/*.json",
           on_page=False),
)}


def applying(facts: Facts) -> list[Report]:
    """The reports a campaign with these facts gets, in the page's order."""
    return [r for r in REPORTS.values() if r.applies(facts)]


def captions() -> dict[str, Caption]:
    """Every caption by file stem (or ``prefix_*``), in the page's order."""
    return {stem: cap for r in REPORTS.values() for stem, cap in r.captions.items()}


def report_of(stem: str) -> Report | None:
    """The report that writes the file ``stem`` (by name first, then by pattern)."""
    for exact in (True, False):
        for report in REPORTS.values():
            if report.owns(stem, exact):
                return report
    return None


def caption_of(report: Report, stem: str) -> Caption:
    if stem in report.captions:
        return report.captions[stem]
    for key, cap in report.captions.items():
        if key.endswith("*") and stem.startswith(key[:-1]):
            return cap
    return ("", stem, "")
