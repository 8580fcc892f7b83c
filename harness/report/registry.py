"""Every report by name: when a campaign gets it, the files it writes, and where it reads more
than the summary; what it reproduces and its files' captions are prose, in
``harness/data/reports.yaml``. One entry per report; the workflow's report rules
(``workflow/rules/report.smk``, one rule per entry, and the confirm, tune and SGD stages'
rules), the outputs `rule all` and the report page ask for (``workflow/rules/page.smk``), the
page's sections and the command line all read this list.

Every report is one function of its module, ``make(inputs) -> list[Path]``: ``inputs`` is
``inputs.Inputs``, the campaign's typed summary loaded once, its model parameters, the tables
and figures directories, the store and the options. The module is imported only when the
report is written (they import matplotlib). Adding a report is one entry here, its prose in
``reports.yaml`` and one ``make`` there.

    python -m harness.report NAME --store results/<c> [options]     (``__main__.py``)
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from ..analysis.guidelines import MOCK_UPS
from ..analysis.simulation import family
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
    simulated_pairs: bool = False  # a simulated cell and a measured cell of the same conditions

    @classmethod
    def of(cls, runs: Iterable, confirm_groups=(), tune_libraries=(), sgd_experiments=(),
           auto_ran=False):
        runs = list(runs)
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
            sgd_experiments=tuple(sgd_experiments), auto_ran=bool(auto_ran),
            simulated_pairs=_simulated_pairs(runs))


def _simulated(run) -> bool:
    """A run on a simulated platform (``Run.platform``, the platform's digest)."""
    return bool(getattr(run, "platform", None))


def _simulated_pairs(runs) -> bool:
    """Does a simulated run hold a cell that a measured run holds too (the same conditions,
    ``harness.analysis.simulation.KEYS``; ``openmpi@<platform>`` copies ``openmpi``)?"""
    def key(run, c):
        return (family(run.library), c.algorithm, c.procs, c.nodes, c.size, c.dtype, c.op, c.delay,
                c.max_delay, c.buffers, c.timing, tuple(p for p in c.params if p[0] != "platform"))
    seen = {True: set(), False: set()}
    for r in runs:
        seen[_simulated(r)].update(key(r, c) for c in r.cells if c.kind not in ("probe", "workload"))
    return bool(seen[True] & seen[False])


Caption = tuple[str, str, str]  # (paper, what it reproduces, how to read it)


@dataclass(frozen=True)
class Report:
    name: str
    module: str  # harness.report.<module>, whose make(inputs) writes it
    about: str  # what it reproduces: paper, tables and figures (reports.yaml)
    tables: tuple[str, ...] = ()  # file stems under tables/ ({library}, {experiment} expand)
    figures: tuple[str, ...] = ()  # file stems under figures/<c>/
    captions: dict[str, Caption] = field(default_factory=dict)  # stem (or prefix_*) -> caption
    #                                                            (reports.yaml)
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
        return any(fnmatchcase(stem, n.replace("{library}", "*").replace("{experiment}", "*")
                               + ("*" if n in self.figures else "")) for n in names)


PROSE_FILE = Path(__file__).parents[1] / "data" / "reports.yaml"
_PROSE = yaml.safe_load(PROSE_FILE.read_text(encoding="utf-8"))


def _report(name: str, module: str, **code) -> Report:
    """A report of this list, its ``about`` and captions read from ``reports.yaml``."""
    prose = _PROSE[name]
    return Report(name, module, prose["about"],
                  captions={k: tuple(v) for k, v in (prose.get("captions") or {}).items()}, **code)


REPORTS = {r.name: r for r in (
    _report("auto_vs_best", "figures", tables=("auto_vs_best",),
            figures=("auto_vs_best_{library}",), rule="report", params="if_fitted",
            options=lambda facts, report: {"libraries": list(facts.native_libraries)}),
    _report("bound", "bound", tables=("bound",), applies=lambda facts: facts.pingpong,
            params="required"),
    _report("auto_choices", "auto_choices", tables=("auto_choices",), figures=("auto_choices",),
            applies=lambda facts: facts.auto_ran),
    _report("confirm", "confirm", tables=("auto_vs_best_confirmed", "guidelines_confirmed"),
            figures=("auto_vs_best_confirmed",), applies=lambda facts: bool(facts.confirm_groups),
            reads="confirm/*.json"),
    _report("tuned", "tuned", tables=("tuned",), figures=("tuned_{library}",),
            applies=lambda facts: bool(facts.tune_libraries), reads="tuning/verify-*.json",
            options=lambda facts, report: {"libraries": list(facts.tune_libraries)}),
    _report("castello_models", "castello_models", tables=("castello_models", "network_params"),
            figures=("castello_fig1", "castello_fig2", "castello_fig3", "maxrate_fig5"),
            applies=lambda facts: facts.pingpong, params="required"),
    _report("cross_library", "cross_library", tables=("cross_library",),
            figures=("cross_library", "cross_library_normalised"),
            applies=lambda facts: len(facts.native_libraries) >= 2,
            options=lambda facts, report: {"reference": report["reference_library"]}),
    _report("suara", "suara",
            tables=("suara_choice", "model_vs_measured", "fitted_params", "suara_agreement"),
            figures=("suara_speedup", "suara_grid", "suara_agreement"),
            applies=lambda facts: facts.suara, params="optional"),
    _report("node_aware", "node_aware",
            tables=("node_aware_counts", "node_aware_times", "node_aware_fig1"),
            figures=("node_aware_vs_procs", "node_aware_vs_size", "node_aware_model",
                     "node_aware_fig1"),
            applies=lambda facts: facts.node_aware, params="optional"),
    _report("pap", "pap", tables=("pap_table3", "pap_table4"),
            figures=("pap_fig10", "pap_fig11", "pap_fig12"), applies=lambda facts: facts.pap),
    _report("workload", "workload", tables=("workload", "workload_normalised", "dnn_models"),
            figures=("workload_fig9", "workload_fig10", "dnn_fig7"),
            applies=lambda facts: bool(facts.workload_models),
            options=lambda facts, report: {"models": list(facts.workload_models)}),
    _report("pingpong", "pingpong", tables=("pingpong",), figures=("pingpong_fig4",),
            applies=lambda facts: facts.pingpong_or_local),
    _report("guidelines", "guidelines", tables=("guidelines",), figures=("guidelines",),
            applies=lambda facts: facts.guidelines),
    _report("projection", "projection", tables=("projection",),
            figures=("projection_suara", "projection_node_aware"),
            applies=lambda facts: facts.suara or facts.node_aware, params="optional"),
    _report("sgd", "sgd", tables=("sgd_{experiment}",), figures=("sgd_{experiment}_loss",),
            applies=lambda facts: bool(facts.sgd_experiments), reads="sgd/{experiment}/*.json",
            on_page=False),
    _report("simulation", "simulation", tables=("simulation_validation", "simulated_cells"),
            figures=("simulation_validation",), applies=lambda facts: facts.simulated_pairs),
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
