"""Every report by name, and the one command line that writes any of them:

    python -m harness.report NAME ARGUMENTS...
    python -m harness.report --list

Most reports read a campaign's summary (``SUMMARY_CSV TABLES_DIR FIGURES_DIR``, some with one
optional argument more); the SGD Table 5 reads the executions' documents. The workflow's
rules call the same functions (``Report.load``). Each report's module is imported only when it
is written (they import matplotlib and pandas). Adding a report is one entry here.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

SUMMARY = "SUMMARY_CSV TABLES_DIR FIGURES_DIR"


@dataclass(frozen=True)
class Report:
    name: str
    module: str  # harness.report.<module>
    function: str  # its make_* function
    about: str
    usage: str = SUMMARY  # the arguments after NAME
    optional: int = 0  # how many of the last arguments may be left out
    variadic: bool = False  # the last argument repeats (one or more)

    def load(self):
        return getattr(importlib.import_module(f"harness.report.{self.module}"), self.function)

    def arity_ok(self, n: int) -> bool:
        need = len(self.usage.split()) - self.optional
        return n >= need if self.variadic else need <= n <= need + self.optional

    def write(self, argv: list[str]) -> list:
        """Write the report from its command-line arguments; the files written."""
        fn = self.load()
        if self.variadic:  # TABLES_DIR FIGURES_DIR EXPERIMENT JSON...: the documents come first
            tables_dir, figures_dir, experiment, *documents = argv
            out = fn(documents, tables_dir, figures_dir, experiment)
        else:
            out = fn(*argv)
        return out["written"] if isinstance(out, dict) else list(out or [])


REPORTS = {r.name: r for r in (
    Report("auto_vs_best", "figures", "make_all",
           "AUTO vs BEST table and per-library throughput figures (Castelló et al., Sec. 4.3, "
           "Figs. 5-6)"),
    Report("suara", "suara", "make_suara", "SUARA2 / SUARA-L tables and figures (Nuriyev et al.)"),
    Report("node_aware", "node_aware", "make_all",
           "RD vs SMP vs NAP, message counts, the max-rate model, Fig. 1 (Bienz et al.)"),
    Report("pap", "pap", "make_pap", "PAP Tables 3-4 and Figs. 10-12 (Proficz 2018)"),
    Report("pingpong", "pingpong", "make_all", "ping-pong and local-reduction fits"),
    Report("workload", "workload", "make_all",
           "training-iteration workloads: AUTO vs BEST, images/s (Castelló et al., Figs. 9-10)"),
    Report("cross_library", "cross_library", "make_all",
           "the libraries side by side, normalised to a reference library",
           f"{SUMMARY} [REFERENCE]", optional=1),
    Report("castello_models", "castello_models", "make_all",
           "Castelló et al. Table 1's models against measurement, Bienz et al. Fig. 5",
           f"{SUMMARY} [MODEL_PARAMS_JSON]", optional=1),
    Report("projection", "projection", "make_projection",
           "the models' projection past the cluster, up to P = 16,384",
           f"{SUMMARY} [PARAMS_JSON]", optional=1),
    Report("sgd", "sgd", "make_table5",
           "Table 5 of the distributed SGD (Proficz 2018) from its executions' documents",
           "TABLES_DIR FIGURES_DIR EXPERIMENT JSON", variadic=True),
)}


def usage() -> str:
    width = max(map(len, REPORTS))
    lines = ["usage: python -m harness.report NAME ARGUMENTS...   (--list: the reports)", ""]
    lines += [f"  {r.name:{width}s}  {r.usage}{'...' if r.variadic else ''}\n"
              f"  {'':{width}s}  {r.about}" for r in REPORTS.values()]
    return "\n".join(lines)


def main(argv=None) -> int:
    """Write one report and print the files written; 2 with the usage on bad arguments."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--list"], ["-h"], ["--help"]):
        print(usage())
        return 0
    report = REPORTS.get(argv[0]) if argv else None
    if report is None or not report.arity_ok(len(argv) - 1):
        what = (f"unknown report {argv[0]!r}" if argv and report is None else
                f"{argv[0]}: expected {report.usage}{'...' if report.variadic else ''}"
                if argv else "no report named")
        print(f"harness.report: {what}\n\n{usage()}", file=sys.stderr)
        return 2
    for path in report.write(argv[1:]):
        print(path)
    return 0
