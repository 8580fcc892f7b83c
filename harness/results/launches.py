"""One summary row per cell from several independent launches (``stopping.launches: R``).

Inside one MPI launch the interval of a cell's mean is tight, yet two launches of the same
cell can differ by more than that (process placement, memory layout, the machine's state).
With R > 1 launches a cell's row therefore keeps:

- ``launches``: launches that gave a usable time (status ok or not-converged);
- ``launch_means``: their means, as a JSON list;
- ``within_mean``, ``within_ci_low``, ``within_ci_high``, ``within_rel_halfwidth``,
  ``within_n``: the within-launch statistics (the mean and interval of the launch means'
  average, the largest within-launch relative half-width, the repetitions of all launches);
- ``mean``, ``ci_low``, ``ci_high``, ``rel_halfwidth``, ``std``: the between-launch
  statistics: the mean of the launch means and its Student-t interval over R - 1 degrees of
  freedom, so every table and figure uses them unchanged (with two or three launches that
  interval can reach below zero: then the interval of the log means is given instead,
  ``ci_method`` ``log-t``; ``stats.time_interval``);
- ``launches_disagree``: true when the between-launch half-width exceeds the precision of the
  stopping rule, i.e. the launches do not agree on the mean to the precision asked for;
- ``odd_launches``: with three launches or more, those whose mean lies more than ``ODD``
  (25 %) from the median of the launch means, a mode of their own (JSON: launch, mean, and
  where its ranks ran: ``shared_cpu``, ``involuntary_switches``, harness/measure/placement.py);
  ``[]`` when none; empty with fewer launches, where no launch can be told odd;
- ``shared_cpu`` / ``involuntary_switches``: any launch with two ranks on one CPU / the most
  switches of any launch;
- ``status``: ``wrong`` if any launch was wrong; else the worst failure if no launch gave a
  time; else ``ok`` when every launch converged and the launches agree, ``not-converged``
  otherwise. ``converged`` follows it.

With R = 1 a row is the launch's own, with ``launches`` = 1.
"""

from __future__ import annotations

import json
import math

import numpy as np

from ..cells import PROBES
from ..stats import t_quantile, time_interval

# point-to-point benchmarks (the probes, harness/algorithms/p2p_bench.py): their bytes cross
# one link once
POINT_TO_POINT = PROBES


def bus_bandwidth(algorithm: str, algbw, procs: int):
    """The bus bandwidth of a row: an allreduce moves 2(P-1)/P of the message over each
    rank's links (the NCCL-tests convention); a ping-pong or a local reduction, its algbw."""
    if not algbw:
        return None
    if algorithm in POINT_TO_POINT:
        return algbw
    return algbw * 2 * (procs - 1) / procs

USABLE = ("ok", "not-converged")
ODD = 0.25  # a launch whose mean is this far from the launches' median is a mode of its own
LAUNCH_COLUMNS = ["launches", "launch_means", "launches_disagree", "odd_launches", "within_mean",
                  "within_ci_low", "within_ci_high", "within_rel_halfwidth", "within_n"]


def combine(rows: list[dict], confidence: float = 0.95, precision: float = 0.025) -> dict:
    """The summary row of one cell from its rows of distinct launches."""
    rows = sorted(rows, key=lambda r: r.get("launch") or 0)
    if len(rows) == 1:
        return {**rows[0], "launches": 1 if rows[0]["status"] in USABLE else 0}
    wrong = [r for r in rows if r["status"] == "wrong"]
    if wrong:
        return {**wrong[0], "launches": len(rows)}
    usable = [r for r in rows if r["status"] in USABLE and _finite(r.get("mean"))]
    if not usable:
        worst = next((r for s in ("timeout", "failed") for r in rows if r["status"] == s), rows[0])
        return {**worst, "launches": 0}
    means = np.array([float(r["mean"]) for r in usable])
    k = len(means)
    mean = float(means.mean())
    if k > 1:
        std = float(means.std(ddof=1))
        hw = t_quantile(confidence, k - 1) * std / math.sqrt(k)
    else:
        std, hw = math.nan, math.nan
    low, high, method = time_interval(means, confidence)  # never below zero
    rel = hw / abs(mean) if mean and k > 1 else math.nan
    disagree = bool(k > 1 and rel > precision)
    within_hw = [(float(r["ci_high"]) - float(r["ci_low"])) / 2 for r in usable
                 if _finite(r.get("ci_high")) and _finite(r.get("ci_low"))]
    within_rel = [float(r["rel_halfwidth"]) for r in usable if _finite(r.get("rel_halfwidth"))]
    every_ok = all(r["status"] == "ok" for r in rows)
    status = "ok" if every_ok and not disagree and k > 1 else "not-converged"
    base = dict(usable[-1])
    procs = int(base["procs"])
    algbw = base["size"] / mean if mean else None
    w_hw = math.sqrt(sum(h * h for h in within_hw)) / len(within_hw) if within_hw else math.nan
    base.update(
        launch=None, launches=k, launch_means=json.dumps([float(m) for m in means]),
        launches_disagree=disagree, odd_launches=odd_launches(usable, means),
        shared_cpu=any(r.get("shared_cpu") is True for r in usable),
        involuntary_switches=max((r["involuntary_switches"] for r in usable
                                  if _finite(r.get("involuntary_switches"))), default=None),
        within_mean=mean, within_ci_low=mean - w_hw, within_ci_high=mean + w_hw,
        within_rel_halfwidth=max(within_rel) if within_rel else math.nan,
        within_n=int(sum(int(r["n"]) for r in usable if _finite(r.get("n")))),
        n=k, mean=mean, std=std, ci_low=low, ci_high=high, ci_method=method, rel_halfwidth=rel,
        # the repetitions' own statistics belong to each launch, not to the launch means
        p5=math.nan, p95=math.nan, outliers=None, lag1=math.nan, effective_n=math.nan,
        t_rejected=None,
        median=float(np.median([float(r["median"]) for r in usable if _finite(r.get("median"))]
                               or [math.nan])),
        min=min(float(r["min"]) for r in usable), max=max(float(r["max"]) for r in usable),
        median_ci_low=min(float(r["median"]) for r in usable),
        median_ci_high=max(float(r["median"]) for r in usable),
        normality_p=math.nan, status=status, converged=status == "ok",
        error=None if status == "ok" else (
            f"launch means disagree: between-launch half-width {rel:.1%} of the mean"
            if disagree else "not every launch converged"),
        algbw=algbw, busbw=bus_bandwidth(str(base.get("algorithm") or ""), algbw, procs),
        finished=max(str(r.get("finished") or "") for r in rows),
        oversubscribed=any(bool(r.get("oversubscribed")) for r in usable),
    )
    return base


def repetitions(frame):
    """The timed repetitions of each summary row over all its launches (a pandas Series):
    ``within_n`` where a row combines several launches (its ``n`` counts launch means there),
    else ``n``."""
    import pandas as pd

    n = pd.to_numeric(frame["n"], errors="coerce").astype(float)
    if "within_n" not in frame or "launches" not in frame:
        return n
    many = pd.to_numeric(frame["launches"], errors="coerce").astype(float) > 1
    return n.where(~many, pd.to_numeric(frame["within_n"], errors="coerce").astype(float))


def odd_launches(usable: list[dict], means) -> str | None:
    """The launches whose mean lies more than ``ODD`` from the median launch mean, as JSON
    (``[]`` for none); None with fewer than three launches."""
    if len(means) < 3:
        return None
    middle = float(np.median(means))
    odd = [{"launch": r.get("launch"), "mean": float(m),
            "shared_cpu": r.get("shared_cpu") if isinstance(r.get("shared_cpu"), bool) else None,
            "involuntary_switches": (int(r["involuntary_switches"])
                                     if _finite(r.get("involuntary_switches")) else None)}
           for r, m in zip(usable, means) if middle > 0 and abs(m - middle) / middle > ODD]
    return json.dumps(odd)


def _finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def combine_frame(df, confidence: float = 0.95, precision: float = 0.025):
    """Every cell's row of a summary frame that holds one row per (cell, launch)."""
    import pandas as pd

    if df.empty:
        return df.reindex(columns=list(df.columns) + [c for c in LAUNCH_COLUMNS if c not in df])
    out = []
    for _, g in df.groupby("cell_id", sort=False):
        out.append(combine(g.to_dict("records"), confidence, precision))
    res = pd.DataFrame(out)
    for c in LAUNCH_COLUMNS:
        if c not in res:
            res[c] = None
    return res
