"""Simulated against measured: how far a simulated platform's times are from the cells it copies.

The rows come from ``harness.analysis.simulation`` (``pairs``: each simulated row beside the
measured row of the same cell; ``aggregate``; ``platforms``). Outputs:

- ``tables/simulation_validation.{md,tex,csv,html}``: per cell (platform, library, algorithm,
  P, size and the other conditions when they vary) the measured time with its 95 % CI, the
  simulated time and error % = (simulated - measured) / measured; a cell without a partner
  says so; a measured row that claims nothing (oversubscribed ‡, not converged †) is marked
  and left out of the aggregates. Two more blocks: the error per (platform, library,
  algorithm) and per (platform, size): how many cells, the mean signed error, the mean and
  largest absolute error, how many simulated times fall inside the measured CI. The CSV holds
  the per-cell frame, times in seconds, error as a fraction and in %.
- ``tables/simulated_cells.{md,tex,csv,html}``: per simulated platform (its digest) the
  simulator, what its numbers copy, its parameters when the rows record them, its rows and
  algorithms.
- ``figures/<c>/simulation_validation.{png,pdf}``: one panel per algorithm, time against
  message size; per library the measured means (solid lines, filled markers, 95 % CI bars) and
  the simulated times (dashed lines, ``x`` markers, "simulated" in the legend with the
  platform's digest).

CLI: ``python -m harness.report simulation --store results/<c>``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd

from ..analysis import simulation as sim
from ..units import format_rate, format_time
from . import facets, style, tables

TABLE = "simulation_validation"
PLATFORMS_TABLE = "simulated_cells"
FIGURE = "simulation_validation"
CAPTION = ("Simulated against measured: each simulated cell beside the measured cell it "
           "copies; error = (simulated - measured) / measured. ‡ the measured cell is "
           "oversubscribed (more ranks than cores), † not converged: no claim, left out of "
           "the aggregates.")
PLATFORMS_CAPTION = "The simulated platforms: what simulated them, what they copy, their cells."
MEASURED = "measured"
SIMULATED = "simulated"


# ------------------------------------------------------------------------------------ tables

def _pct(v) -> str:
    return f"{v:+.1f} %" if isinstance(v, float) and math.isfinite(v) else ""


def _abs_pct(v) -> str:
    return f"{v:.1f} %" if isinstance(v, float) and math.isfinite(v) else ""


def _context(p: pd.DataFrame) -> list[str]:
    """The conditions that vary among the rows (beside P and size), shown as columns."""
    out = []
    for c in ("nodes", "dtype", "op", "delay", "max_delay", "buffers", "timing", "params"):
        if c in p and p[c].astype(str).nunique() > 1:
            out.append(c)
    return out


def _mark(r) -> str:
    if r["partner"] == sim.NO_MEASURED:
        return ""
    return " ‡" if r["measured_oversubscribed"] else (
        " †" if r["measured_status"] == "not-converged" else "")


def _partner(r) -> str:
    if r["partner"] == sim.MEASURED_UNTIMED:
        return f"{sim.MEASURED_UNTIMED} ({r['measured_status']})"
    if r["partner"] == sim.SIM_UNTIMED:
        return f"{sim.SIM_UNTIMED} ({r['simulated_status']})"
    return r["partner"]


def cell_rows(p: pd.DataFrame) -> tuple[list[str], list[list]]:
    ctx = _context(p)
    header = ["Platform", "Library", "Algorithm", "P", *[c.replace("_", " ") for c in ctx],
              "Size", "Measured", "95% CI", "Simulated", "Error", "Partner"]
    body = []
    for r in p.to_dict("records"):
        mt, mci = tables.format_time(r["measured_mean"], r["measured_ci_low"],
                                     r["measured_ci_high"])
        st, _ = tables.format_time(r["simulated_time"])
        body.append([r["platform"] or "—", style.library_label(r["library"], r["library_version"]),
                     r["algorithm"], str(int(r["procs"])),
                     *[tables.context_value_label(c, r[c]) for c in ctx],
                     tables.format_size(r["size"]), (mt + _mark(r)) if mt else "", mci, st,
                     _pct(r["error_pct"]), _partner(r)])
    return header, body


def aggregate_rows(a: pd.DataFrame, by) -> tuple[list[str], list[list]]:
    names = {"platform": "Platform", "library": "Library", "algorithm": "Algorithm",
             "size": "Size"}
    header = [names[b] for b in by] + ["Cells", "Mean error", "Mean abs. error", "Largest error",
                                       "In measured CI", "Left out"]
    show = {"platform": lambda v: v or "—", "library": style.library_title,
            "algorithm": str, "size": tables.format_size}
    body = [[show[b](r[b]) for b in by] + [str(r["n"]), _pct(r["mean_error_pct"]),
                                           _abs_pct(r["mean_abs_error_pct"]),
                                           _pct(r["worst_error_pct"]),
                                           f"{r['within_ci']} of {r['n']}", str(r["left_out"])]
            for r in a.to_dict("records")]
    return header, body


def validation_table(p: pd.DataFrame, path) -> list[Path]:
    header, body = cell_rows(p)
    elsewhere = p.attrs.get("measured_elsewhere", 0)
    note = (f"Not listed: {elsewhere} measured allreduce row{'s' * (elsewhere != 1)} of "
            "libraries and algorithms that were not simulated." if elsewhere else "")
    blocks = [tables.Block(header, body, CAPTION + (" " + note if note else ""),
                           "tab:simulation-validation")]
    for by, title, label in ((sim.BY_ALGORITHM, "Error per library and algorithm", "algorithm"),
                             (sim.BY_SIZE, "Error per message size", "size")):
        h, b = aggregate_rows(sim.aggregate(p, by), by)
        blocks.append(tables.Block(h, b, f"{title} (paired cells that claim something).",
                                   f"tab:simulation-validation-{label}"))
    layout = tables.Layout(placeholder="no simulated cells", md_note=note + "\n" if note else "")
    return tables.write_table(p, path, CAPTION, blocks=blocks, layout=layout)


def _parameters(params: dict) -> str:
    if not params:
        return "not recorded"
    out = []
    for k, v in params.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if "latency" in k:
                v = format_time(float(v))
            elif "bandwidth" in k or "rate" in k:
                v = format_rate(float(v))
        out.append(f"{k} {v}")
    return ", ".join(out)


def platforms_table(summary: pd.DataFrame, path) -> list[Path]:
    t = sim.platforms(summary)
    header = ["Platform", "Simulator", "Copies", "Parameters", "Rows", "P", "Libraries",
              "Algorithms"]
    body = [[r["platform"] or "—", r["simulator"], r["copies"], _parameters(r["parameters"]),
             str(r["rows"]), r["procs"], r["libraries"],
             r["algorithms"]]
            for r in t.to_dict("records")]
    frame = t.assign(parameters=[json.dumps(v, sort_keys=True) for v in t["parameters"]])
    return tables.write_table(frame, path, PLATFORMS_CAPTION, header=header, rows=body,
                              layout=tables.Layout(placeholder="no simulated platform"))


# ----------------------------------------------------------------------------------- figures

def points(p: pd.DataFrame) -> pd.DataFrame:
    """One row per point drawn: the measured means (with CI) and the simulated times, a
    ``line`` per library and source (``measured``, or ``simulated|<platform>``)."""
    out = []
    for r in p.to_dict("records"):
        lib = r["library"]
        if r["partner"] != sim.NO_MEASURED and math.isfinite(r["measured_mean"]):
            out.append({"algorithm": r["algorithm"], "size": r["size"],
                        "line": f"{lib}|{MEASURED}|", "mean": r["measured_mean"],
                        "ci_low": r["measured_ci_low"], "ci_high": r["measured_ci_high"],
                        "no_claim": bool(r["claims_nothing"])})
        if r["partner"] != sim.NO_SIMULATED and math.isfinite(r["simulated_time"]):
            t = r["simulated_time"]
            out.append({"algorithm": r["algorithm"], "size": r["size"],
                        "line": f"{lib}|{SIMULATED}|{r['platform']}", "mean": t, "ci_low": t,
                        "ci_high": t, "no_claim": False})
    d = pd.DataFrame(out, columns=["algorithm", "size", "line", "mean", "ci_low", "ci_high",
                                   "no_claim"])
    # a measured cell paired with several platforms is drawn once
    return d.drop_duplicates(["algorithm", "size", "line"]).reset_index(drop=True)


def _look(line: str) -> facets.Look:
    lib, source, _ = line.split("|")
    base = facets.library_look(lib)
    if source == SIMULATED:
        return dataclasses.replace(base, marker="x", ls="--", lw=1.3, ms=5.0, zorder=4)
    return base


def _label(line: str) -> str:
    lib, source, platform = line.split("|")
    text = f"{style.library_title(lib)} {source}"
    return text + (f" (platform {platform})" if platform else "")


def _order(lines) -> list[str]:
    return sorted(lines, key=lambda x: (style.library_sort_key(x.split("|")[0]), x))


def figure(p: pd.DataFrame, path) -> list[Path]:
    data = points(p)
    spec = facets.Spec(
        x="size", series="line", y="time", cols="algorithm", wrap=3, look=_look, label=_label,
        order=_order, hollow="no_claim",
        panel_title=lambda key: str(key.get("algorithm", "")),
        title="Measured (solid) and simulated (dashed, x) time per call",
        hollow_note="hollow: the measured cell is not converged or oversubscribed (no claim)")
    return facets.figure(spec, data, path, empty="no simulated cell with a measured partner")


def make(inputs) -> list[Path]:
    """Write both tables and the figure; returns the paths."""
    p = sim.pairs(inputs.summary)
    written = validation_table(p, inputs.tables / TABLE)
    written += platforms_table(inputs.summary, inputs.tables / PLATFORMS_TABLE)
    return written + figure(p, inputs.figures / FIGURE)
