"""The confirmation stage: is the campaign's BEST really faster than AUTO?

A campaign picks BEST as the fastest of 10-30 forced algorithms, each with a noisy mean (the
winner's curse), and launches minutes apart differ by more than a launch's own interval. So
after the campaign, per (library, P, nodes, thread level) group and per (size, dtype, op,
timing), this stage measures AUTO and BEST again, in fresh MPI launches, alternately:
A B B A, ``rounds`` times (with several BEST algorithms in a group, A B1 B2 B2 B1 A). Each
launch measures all the group's cells of its algorithm.

The gain and its interval come from these launches alone. Each A launch is paired with
the B launch next to it in time (A1-B1 and B2-A2 in A B B A, so linear drift cancels over a
round); with ``k = 2 * rounds`` pairs the gain is ``exp(mean(ln(t_A / t_B)))`` and its 95 %
interval the Student-t interval of the log ratios over k - 1 degrees of freedom,
exponentiated; the verdict rests on it (``verdict_test``). Beside it, with no assumption on
the distribution, the exact Wilcoxon signed-rank test of the paired launch medians
(``harness.analysis.paired``): ``median_gain`` (Hodges-Lehmann), ``wilcoxon_p``,
``rank_biserial``, ``smallest_p`` (2 / 2^k: 4 pairs can never reach 5 %) and its own reading,
``nonparametric`` (``BEST faster``, ``AUTO faster``, ``no difference shown``, ``too few
pairs``). Verdicts: ``BEST faster`` (interval above 1), ``AUTO faster`` (below 1),
``tie`` (contains 1), ``AUTO is BEST`` (no forced algorithm beat AUTO in the campaign; nothing
to confirm), ``oversubscribed`` (more ranks than cores: no claim, not measured), ``no data``.

The performance guidelines' violations (a mock-up made of the library's own collectives
faster than AUTO in the campaign, ``harness.analysis.guidelines``) are measured again the same
way, the mock-up in BEST's place (entries with ``role: guideline``): in the campaign each side
is one launch, and one launch can land in a slow mode of its own (MPICH AUTO at 1 MiB: 300-400
us in most launches, 700-1000 us in about one in four).

Launches are stored under ``results/<campaign>/confirm/`` (job scripts, raw, run documents,
like the campaign's own); a rerun after an interrupt skips every launch whose run document
is complete and measures only the rest. The stage's output per group is
``confirm/<group>.json``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .. import fileio
from ..analysis import guidelines, paired
from ..analysis.best import fastest
from ..analysis.vocabulary import comparable_mask, is_comparable, is_oversubscribed, is_timed
from ..cells import Run
from ..results import store as results
from ..results import summary
from ..results.summary import allreduce_rows
from ..stats import t_quantile
from . import plan, runner

USABLE = results.TIMED  # a launch cell whose stats are a time
VERDICT_TEST = "Student-t interval of the log ratios of paired launch means"
KEY = ["size", "dtype", "op", "timing", "buffers"]
LAUNCH_BASE = 100  # launch indices of confirmation runs (campaign launches are 0..R-1)


def group_name(library: str, procs: int, nodes: int, thread_level: str) -> str:
    return f"{library}-p{procs}-n{nodes}-{thread_level}"


def groups(runs) -> dict[str, tuple]:
    """The groups the campaign can confirm: native:auto and another native algorithm or a
    guideline mock-up measured with the same library, P, nodes and thread level."""
    algs: dict[tuple, set] = {}
    for r in runs:
        key = (r.library, r.procs, r.nodes, r.thread_level)
        algs.setdefault(key, set()).update(c.algorithm for c in r.cells
                                           if is_comparable(c)
                                           or c.algorithm in guidelines.MOCK_UPS)
    return {group_name(*k): k for k, a in sorted(algs.items())
            if "native:auto" in a and len(a) > 1}


def pick(df, library: str, procs: int, nodes: int, thread_level: str) -> list[dict]:
    """Per (size, dtype, op, timing, buffers) of the group: AUTO's and BEST's campaign rows, or why
    there is nothing to confirm."""
    df = summary.typed(df)
    d = df[(df.library == library) & (df.procs == procs) & (df.nodes == nodes)
           & (df.thread_level == thread_level) & comparable_mask(df)]
    out = []
    for key, g in d.groupby(KEY, sort=True):
        entry = dict(zip(KEY, key), library=library, procs=procs, nodes=nodes,
                     thread_level=thread_level)
        auto = g[g.algorithm == "native:auto"]
        b = fastest(g[g.algorithm != "native:auto"])  # BEST among the forced algorithms
        if auto.empty or not is_timed(auto.iloc[0]) or b is None:
            out.append({**entry, "verdict": "no data"})
            continue
        a = auto.iloc[0]
        entry.update(auto_cell=a.cell_id, auto_campaign=float(a["mean"]), best=b.algorithm,
                     best_cell=b.cell_id, best_campaign=float(b["mean"]),
                     campaign_gain=float(a["mean"]) / float(b["mean"]))
        if is_oversubscribed(a) or is_oversubscribed(b):
            entry["verdict"] = "oversubscribed"
        elif b["mean"] >= a["mean"]:
            entry["verdict"] = "AUTO is BEST"
        out.append(entry)
    return out


def pick_guidelines(df, library: str, procs: int, nodes: int, thread_level: str) -> list[dict]:
    """The group's performance-guideline violations (``analysis.guidelines``: a mock-up of the
    library's own collectives faster than AUTO in the campaign, 95 % intervals apart), each an
    entry to measure again like BEST (``role`` guideline, the mock-up in ``best``): one launch
    per side is no experimental unit, and a launch can land in a slow mode of its own."""
    df = summary.typed(df)
    table = guidelines.comparisons(df)
    table = table[(table.library == library) & (table.procs == procs) & (table.nodes == nodes)
                  & (table.thread_level == thread_level) & (table.verdict == "violation")]
    rows = df[df["delay"] == "none"]

    def cell(v, algorithm):
        same = rows[(rows.algorithm == algorithm)]
        for k in guidelines.KEY:
            same = same[same[k] == v[k]]
        return same.iloc[-1]  # the row comparisons() compared (the last of duplicates)

    out = []
    for v in table.to_dict("records"):
        a, b = cell(v, "native:auto"), cell(v, v["mock_up"])
        out.append({**{k: v[k] for k in KEY}, "library": library, "procs": procs,
                    "nodes": nodes, "thread_level": thread_level, "role": "guideline",
                    "auto_cell": a.cell_id, "auto_campaign": float(a["mean"]),
                    "best": v["mock_up"], "best_cell": b.cell_id,
                    "best_campaign": float(b["mean"]),
                    "campaign_gain": float(a["mean"]) / float(b["mean"])})
    return out


def schedule(entries: list[dict], rounds: int) -> list[str]:
    """The order of launches by algorithm: A B1 .. Bn Bn .. B1 A per round."""
    bs = sorted({e["best"] for e in entries if "verdict" not in e})
    if not bs:
        return []
    one = ["native:auto"] + bs + bs[::-1] + ["native:auto"]
    return one * rounds


def gain_interval(a: list[float], b: list[float], confidence: float = 0.95):
    """Gain t_A/t_B and its interval from paired launch means (see the module doc)."""
    logs = np.log(np.asarray(a, float) / np.asarray(b, float))
    k = len(logs)
    g = float(np.exp(logs.mean()))
    if k < 2:
        return g, math.nan, math.nan
    hw = t_quantile(confidence, k - 1) * float(logs.std(ddof=1)) / math.sqrt(k)
    return g, float(np.exp(logs.mean() - hw)), float(np.exp(logs.mean() + hw))


def verdict(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "tie"
    return "BEST faster" if low > 1 else "AUTO faster" if high < 1 else "tie"


def launch_in_order(store, lib, launches, settings: dict, cfg, label: str, log=print):
    """Execute each run of ``launches`` once, in that order, yielding its run document; a run
    whose document is already complete (an earlier, interrupted attempt of the stage) is not
    launched again."""
    for i, run in enumerate(launches):
        doc_path = store.run_doc(run.run_id)
        doc = fileio.read_json(doc_path) if doc_path.is_file() else None
        if doc is None or doc.get("status") != "complete":
            alg = run.cells[0].algorithm if run.cells else "?"
            log(f"{label}: launch {i + 1}/{len(launches)} {alg} ({len(run.cells)} cells)")
            script, spec = runner.prepare(run, lib, store, settings, seed=cfg.seed,
                                          plugins=cfg.plugins, config_hash=cfg.digest)
            runner.write(store, script, spec)
            runner.execute(store, spec, timeout=cfg.run_walltime)
            doc = fileio.read_json(doc_path)
        yield doc


def run_group(campaign, name: str, out: Path, log=print) -> dict:
    """Confirm one group of ``campaign`` (a ``harness.campaign.workflow.Campaign``); writes ``out``."""

    library, procs, nodes, level = campaign.confirm_groups()[name]
    cfg = campaign.cfg
    df = allreduce_rows(summary.load(campaign.store.summary))
    entries = pick(df, library, procs, nodes, level) + pick_guidelines(df, library, procs, nodes, level)
    todo = [e for e in entries if "verdict" not in e]
    rounds = int(cfg.confirm["rounds"])
    order = schedule(todo, rounds)
    lib = plan.library_for(cfg, library)
    store = results.CampaignStore(campaign.store.dir, "confirm")
    settings = {**campaign.settings(), "time_budget": cfg.confirm["time_budget"]}
    cells = {c.cell_id: c for r in campaign.runs.values() for c in r.cells}
    means: dict[str, list] = {e["auto_cell"]: [] for e in todo}
    means.update({e["best_cell"]: [] for e in todo})
    medians: dict[str, list] = {k: [] for k in means}
    launches = []
    for i, alg in enumerate(order):
        ids = sorted({e["auto_cell"] if alg == "native:auto" else e["best_cell"]
                      for e in todo if alg in ("native:auto", e["best"])})
        launches.append(Run(library=library, env=plan.launch_env(lib, alg), procs=procs,
                                 nodes=nodes, cells=tuple(cells[c] for c in ids),
                                 thread_level=level, launch=LAUNCH_BASE + i))
    for doc in launch_in_order(store, lib, launches, settings, cfg, f"confirm {name}", log):
        for c in doc["cells"]:
            st = c.get("stats") or {}
            ok = c["status"] in results.TIMED and st.get("mean")
            means[c["cell_id"]].append(float(st["mean"]) if ok else math.nan)
            medians[c["cell_id"]].append(float(st.get("median") or math.nan) if ok else math.nan)
    for e in todo:
        a, b = means[e["auto_cell"]], means[e["best_cell"]]
        pairs = [(x, y) for x, y in zip(a, b) if math.isfinite(x) and math.isfinite(y)]
        e.update(auto_means=a, best_means=b, pairs=len(pairs))
        if not pairs:
            e.update(verdict="no data")
            continue
        g, lo, hi = gain_interval([p[0] for p in pairs], [p[1] for p in pairs],
                                  float(cfg.stopping["confidence"]))
        e.update(gain=g, gain_ci_low=lo, gain_ci_high=hi, verdict=verdict(lo, hi),
                 verdict_test=VERDICT_TEST,
                 auto_mean=float(np.mean([p[0] for p in pairs])),
                 best_mean=float(np.mean([p[1] for p in pairs])))
        # beside it, no assumption on the distribution: the launch medians, paired the same way
        ranked = paired.compare(medians[e["auto_cell"]], medians[e["best_cell"]],
                                names=("AUTO", "BEST"))
        e.update(auto_medians=medians[e["auto_cell"]], best_medians=medians[e["best_cell"]],
                 median_gain=ranked["ratio"], wilcoxon_p=ranked["p"],
                 rank_biserial=ranked["rank_biserial"], smallest_p=ranked["smallest_p"],
                 nonparametric=ranked["verdict"], nonparametric_test=ranked["test"])
    doc = {"group": name, "library": library, "procs": procs, "nodes": nodes,
           "thread_level": level, "rounds": rounds, "launches": len(order),
           "finished": results.now(), "entries": entries}
    fileio.write_json(out, doc)
    return doc
