"""Every timed allreduce cell against its lower bound (``tables/bound``): ``bound`` (Chan et
al. 2007 with the campaign's ping-pong fit, ``harness.analysis.bound``) and ``bound_ratio`` =
time / bound per cell in the CSV; the Markdown and LaTeX give, per installation, P and
algorithm, the median ratio over the sizes and its smallest and largest."""

from __future__ import annotations

from pathlib import Path

from ..analysis.bound import by_algorithm, cells
from . import style, tables

TITLE = ("Time against the lower bound ceil(log2 P) alpha + 2(P-1)/P n beta + (P-1)/P n gamma "
         "(Chan et al. 2007; alpha, beta, gamma: the campaign's ping-pong fit)")


def make(inputs) -> list[Path]:
    t = cells(inputs.summary, inputs.params or {})
    rows = [[style.library_label(g.library, g.library_version), str(int(g.procs)),
             str(int(g.nodes)), tables.algorithm_label(g.algorithm), str(g.sizes),
             f"{g.median:.2f}×", f"{g.smallest:.2f}×", f"{g.largest:.2f}×",
             str(g.below) if g.below else "", g.level + (" ‡" if g.oversubscribed else "")]
            for g in by_algorithm(t).itertuples(index=False)]
    header = ["Library", "P", "Nodes", "Algorithm", "Sizes", "Median time/bound", "Smallest",
              "Largest", "Below the bound", "Link"]
    return tables.write_table(
        t, inputs.tables / "bound", TITLE, header=header, rows=rows, layout=tables.Layout(
        align="lrrlrrrrrl", placeholder="no timed cell with a fitted ping-pong of its library",
        md_note="time/bound: 1 would be optimal; the CSV gives every cell's bound (s) and ratio. "
                "Link: the ping-pong level whose alpha and beta the bound uses (network across "
                "nodes; node or socket for ranks sharing one). Below the bound: sizes whose time "
                "is under it, where the fitted alpha or beta overstate what the link can do (a fit, "
                "not a minimum: e.g. a ping-pong latency that carries more Python overhead than one "
                "allreduce call, or a noisy fit); there the ratio is not a distance from the optimum. "
                "‡ oversubscribed cells.\n"))
