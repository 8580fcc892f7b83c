"""Table 5 of Proficz 2018 (distributed SGD of the CNN, Sect. 6) from the executions of one
``sgd:`` experiment (``harness.measure.sgd``), and the training loss figure.

- ``table5(docs)`` (``harness/analysis/sgd.py``): per algorithm the all-reduce average elapsed time (the mean over the
  executions of each execution's mean over iterations of the mean over ranks) with its 95 %
  Student-t interval over executions, its speedup over the ring (ratio of the means; in
  brackets the 95 % interval of the per-round ratios, the executions of one round being
  neighbours in time), the training total time likewise, the final test accuracy, and the
  paper's values beside them.
- the table: ``sgd_<experiment>.{md,tex,csv}`` (``.csv``: the numbers, times in seconds).
- ``loss_figure``: training loss over the iterations per algorithm (mean over executions,
  smoothed), ``figures/<c>/sgd_<experiment>_loss.{png,pdf}``.
- ``make(inputs)``: all of them (rule ``report_sgd``); ``python -m harness.report sgd --store
  results/<c> --experiment E``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..analysis.sgd import ORDER, PAPER, loss_curves, table5  # noqa: F401  (the table's numbers)
from ..fileio import read_json
from ..units import format_number
from . import style, tables

NAMES = {"ring": "Ring", "slt": "SLT", "prr": "PRR"}
STYLES = ["-", "--", ":", "-."]
SMOOTH = 10  # iterations of the loss figure's moving average


def _ms(v) -> str:
    return "" if not math.isfinite(v) else (f"{v * 1e3:.3f}" if v < 0.01 else f"{v * 1e3:.2f}")


def _x(v, lo=math.nan, hi=math.nan) -> str:
    if not math.isfinite(v):
        return ""
    return f"{v:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) and math.isfinite(hi) else "")


HEADER = ["Algorithm", "n", "All-reduce (ms)", "95% CI", "All-reduce speedup",
          "Training total (s)", "95% CI", "Training speedup", "Wait for estimates (ms)",
          "Test accuracy",
          "Paper: all-reduce (ms)", "Paper: speedup", "Paper: training (s)", "Paper: speedup"]


def _rows(t: pd.DataFrame) -> list[list[str]]:
    out = []
    for r in t.itertuples(index=False):
        out.append([
            NAMES.get(r.algorithm, r.algorithm), str(r.executions),
            _ms(r.allreduce_mean), f"{_ms(r.allreduce_ci_low)}–{_ms(r.allreduce_ci_high)}"
            if math.isfinite(r.allreduce_ci_low) else "",
            _x(r.allreduce_speedup, r.allreduce_speedup_ci_low, r.allreduce_speedup_ci_high)
            if r.algorithm != "ring" else "1.000",
            format_number(r.total_mean),
            f"{format_number(r.total_ci_low)}–{format_number(r.total_ci_high)}"
            if math.isfinite(r.total_ci_low) else "",
            _x(r.total_speedup, r.total_speedup_ci_low, r.total_speedup_ci_high)
            if r.algorithm != "ring" else "1.000",
            _ms(r.estimate_wait) if r.algorithm in ("slt", "prr") else "–",
            f"{r.test_accuracy:.3f}",
            format_number(r.paper_allreduce, ".1f", 1e3),
            f"{r.paper_allreduce_speedup:.3f}" if math.isfinite(r.paper_allreduce_speedup) else "",
            f"{r.paper_total:.1f}" if math.isfinite(r.paper_total) else "",
            f"{r.paper_total_speedup:.3f}" if math.isfinite(r.paper_total_speedup) else "",
        ])
    return out


def _count(values) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}–{hi}"


def caption(docs: list[dict]) -> str:
    d = docs[0]
    s = d["spec"]["experiment_settings"]
    prov = d.get("provenance") or {}
    hosts = sorted(set(prov.get("hosts") or []))
    cores = sorted(set(prov.get("cores") or []))
    strag = s.get("straggler") or 0
    strag_text = ("no injected straggler (only the natural imbalance)" if not strag else
                  f"a straggler computing {strag * 1e3:g} ms more per iteration "
                  f"({'a random rank each iteration' if s.get('straggler_rank') == 'random' else 'rank ' + str(s.get('straggler_rank'))})")
    n = {a: sum(1 for x in docs if x["algorithm"] == a) for a in {x["algorithm"] for x in docs}}
    return (f"Table 5 of Proficz 2018 reproduced: distributed SGD of the paper's CNN "
            f"({d['model']['parameters']:,} float32 parameters, averaged by an allreduce after "
            f"every iteration) on SYNTHETIC CIFAR-10-shaped data (per-class templates plus "
            f"Gaussian noise, sd {s['noise']:g}), not CIFAR-10. This machine: "
            f"{str(prov.get('library_version', d['library'])).split(',')[0]}, P = {d['procs']} on "
            f"{', '.join(hosts) or '?'} ({'/'.join(map(str, cores)) or '?'} cores), one torch "
            f"thread per rank; {s['iterations']} iterations of batch {s['batch']} per rank; "
            f"{strag_text}; {_count(n.values())} executions per algorithm, "
            f"interleaved. All-reduce: mean over iterations of the mean over ranks of each call's "
            f"elapsed time; training: the slowest rank's time for all iterations; 95% Student-t "
            f"intervals over executions; speedups = ring mean / algorithm mean, in brackets the "
            f"95% interval of the per-round ratios. Wait for estimates: mean time per rank and "
            f"iteration the training waited for the monitor's exchange before the allreduce "
            f"(in the training time, not the allreduce's). The paper: 16 nodes, 1 Gbps Ethernet, CIFAR-10, "
            f"128 executions per algorithm.")


def loss_figure(docs: list[dict], path_without_ext, title: str) -> list[Path]:
    style.setup()
    fig = Figure(figsize=(4.6, 2.8), layout="constrained")
    ax = fig.subplots()
    curves, identical = loss_curves(docs, SMOOTH)
    for j, (alg, (runs, mean, smooth)) in enumerate(curves.items()):
        color, n = style.color(alg), len(mean)
        ax.plot(np.arange(1, n + 1), mean, color=color, alpha=0.25, lw=0.6)
        ax.plot(np.arange(n - len(smooth) + 1, n + 1), smooth, color=color, lw=1.4,
                ls=STYLES[j % len(STYLES)], label=f"{NAMES.get(alg, alg)} ({runs} executions)")
    if identical:  # e.g. P = 2: every algorithm adds the same two numbers, bit for bit
        ax.text(0.98, 0.97, "the curves coincide: every execution\ntrained bit-identical parameters",
                transform=ax.transAxes, ha="right", va="top", fontsize=7, color="0.35")
    ax.set_xlabel("iteration")
    ax.set_ylabel("training loss (cross-entropy)")
    ax.set_title(title)
    ax.legend()
    return style.save(fig, path_without_ext)


def make(inputs) -> list[Path]:
    """Table 5 and the loss figure of one experiment (``inputs.experiment``) from its
    executions' documents (``inputs.documents``: ``sgd/<experiment>/<execution>.json``)."""
    experiment = inputs.experiment
    docs = [read_json(p) for p in inputs.documents]
    if not docs:
        raise ValueError(f"sgd experiment {experiment}: no executions")
    t = table5(docs)
    written = tables.write_table(t, inputs.tables / f"sgd_{experiment}", caption(docs),
                                 header=HEADER, rows=_rows(t),
                                 layout=tables.Layout(bold_caption=True))
    d = docs[0]
    title = (f"Training loss, {d['library']} P={d['procs']}, synthetic data "
             f"(moving average of {SMOOTH})")
    written += loss_figure(docs, inputs.figures / f"sgd_{experiment}_loss", title)
    return written
