"""The PAP paper's tables as data (Proficz 2018, Tables 3-4): the PAP cells of a summary
(``pap_rows``), each algorithm against the ring per block, size and max delay (``table3``,
``table4``), and the Sect. 3 bound per cell from the raw arrivals (``raw_metrics``,
``bounds``). Rendered and drawn by ``harness/report/pap.py``.

- ``table3(d, raw_dir)``: per library, P, dtype, op, size and delay mode: mean elapsed time
  per algorithm and max delay, speedup = ring / algorithm; ``better`` when faster than the
  ring (bold in the paper-style renderings). With the campaign's ``raw/`` directory, each
  row also carries its measured lateness and tail (``raw_metrics``) and its block the
  Sect. 3 bound Δ − δ (``bounds``).
- ``table4(d)``: per library, P, dtype, op, delay mode and PRR variant: per size and max
  delay, the difference PRR - ring in ms and the speedup.
- ``raw_metrics(raw_dir, cell_ids)``: per cell, from the raw per-rank arrivals and exits:
  ``lateness`` (last arrival minus the mean of the others), ``tail`` (last exit minus last
  arrival), ``elapsed`` (mean over ranks of exit minus arrival), each a mean over repetitions.
- ``bounds(d, metrics, summary)``: per block (library, P, dtype, op, size) the Sect. 3 bound
  on what knowing the arrival times can save: Δ = the ring's elapsed time with balanced
  arrivals (its delay-``none`` cell), δ = the time to send the message between two processes
  (the campaign's ``pingpong`` cell of that library and size when there is one, else the
  shortest tail of the block's delayed cells, an upper estimate), bound = Δ − δ.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..results.store import row_json
from ..results.summary import typed
from .auto_vs_best import prepare
from .vocabulary import timed_mask

REFERENCE = "ring"
ORDER = ["ring", "rabenseifner", "slt", "prr"]
USES_ARRIVAL = {"slt", "prr"}

GROUP = ["library", "library_version", "procs", "dtype", "op"]
BOUND_COLUMNS = ["lateness", "tail", "Delta", "delta", "delta_source", "bound"]

def pap_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The PAP cells of a summary with a time, with ``label``, ``knowledge`` and ``mode``
    (the delay mode; ``none`` rows are the max delay 0 of every mode)."""
    d = prepare(df)
    params = d["params"].map(row_json)
    d = d[params.map(lambda p: "compute" in p) & timed_mask(d)].copy()
    params = d["params"].map(row_json)
    default = d["algorithm"].map(lambda a: "oracle" if a in USES_ARRIVAL else "")
    d["knowledge"] = [p.get("knowledge", k) for p, k in zip(params, default)]
    d["label"] = [a if k in ("", "oracle") else f"{a} ({k})"
                  for a, k in zip(d["algorithm"], d["knowledge"])]
    d.loc[d["delay"] == "none", "max_delay"] = 0.0
    return d.reset_index(drop=True)


def label_order(labels) -> list[str]:
    def key(label):
        base = label.split(" (")[0]
        return (ORDER.index(base) if base in ORDER else len(ORDER), base, label)
    return sorted(set(labels), key=key)


def delay_modes(d: pd.DataFrame) -> list[str]:
    modes = sorted(set(d["delay"]) - {"none"})
    return modes or ["none"]


def by_mode(d: pd.DataFrame):
    """(mode, rows of that mode plus the shared delay-none rows)."""
    for mode in delay_modes(d):
        yield mode, d[d["delay"].isin([mode, "none"])]


def raw_metrics(raw_dir, cell_ids) -> pd.DataFrame:
    """``cell_id``, ``lateness``, ``tail``, ``elapsed`` (seconds, means over repetitions) of
    the cells ``cell_ids`` from the ``arrival``/``finish`` vectors of ``raw_dir/*.parquet``.
    Per repetition, with a the ranks' arrivals and f their exits on the common clock:
    lateness = max(a) − mean of the other ranks' a, tail = max(f) − max(a), elapsed =
    mean(f − a). Cells without raw rows are left out."""
    wanted, rows = set(cell_ids), []
    cols = ["cell_id", "lateness", "tail", "elapsed"]
    if not wanted or raw_dir is None or not Path(raw_dir).is_dir():
        return pd.DataFrame(columns=cols)
    parts = []
    for path in sorted(Path(raw_dir).glob("*.parquet")):
        r = pd.read_parquet(path, columns=["cell_id", "arrival", "finish"])
        parts.append(r[r["cell_id"].isin(wanted)])
    raw = pd.concat(parts) if parts else pd.DataFrame(columns=["cell_id", "arrival", "finish"])
    for cell, g in raw.groupby("cell_id", sort=True):
        a = np.vstack(g["arrival"].map(np.asarray).to_list()).astype(float)
        f = np.vstack(g["finish"].map(np.asarray).to_list()).astype(float)
        last = a.max(axis=1)
        others = (a.sum(axis=1) - last) / max(a.shape[1] - 1, 1)
        rows.append({"cell_id": cell, "lateness": float(np.mean(last - others)),
                     "tail": float(np.mean(f.max(axis=1) - last)),
                     "elapsed": float(np.mean((f - a).mean(axis=1)))})
    return pd.DataFrame(rows, columns=cols)


def bounds(d: pd.DataFrame, metrics: pd.DataFrame, summary: pd.DataFrame | None = None
           ) -> pd.DataFrame:
    """The Sect. 3 bound per block (``GROUP`` + size) of the PAP rows ``d`` (``pap_rows``):
    ``Delta`` (the ring's elapsed with balanced arrivals: its delay-none cell's raw
    ``elapsed``), ``delta`` (one transfer of the message between two processes: the mean of
    the summary's ``pingpong`` cell of that library and size, else the shortest ``tail`` of
    the block's delayed cells), ``delta_source`` and ``bound`` = Delta − delta."""
    cols = GROUP + ["size", "Delta", "delta", "delta_source", "bound"]
    if d.empty or metrics.empty:
        return pd.DataFrame(columns=cols)
    m = d.merge(metrics, on="cell_id", how="inner")
    probes = pd.DataFrame()
    if summary is not None and len(summary) and "algorithm" in summary.columns:
        s = typed(summary)
        s = s[s["algorithm"] == "pingpong"]
        one = s["params"].map(lambda p: int(row_json(p).get("pairs", 1)) == 1).astype(bool)
        probes = s[one & timed_mask(s)] if len(s) else s
    rows = []
    for key, g in m.groupby(GROUP + ["size"], sort=True):
        row = dict(zip(GROUP + ["size"], key))
        ring = g[(g["label"] == REFERENCE) & (g["delay"] == "none")]
        Delta = float(ring["elapsed"].mean()) if len(ring) else math.nan
        pp = probes[(probes["library"] == row["library"]) & (probes["size"] == row["size"])
                    ] if len(probes) else probes
        delayed = g[(g["delay"] != "none") & (g["max_delay"] > 0)]
        if len(pp):
            delta, source = float(pp["mean"].min()), "pingpong"
        elif len(delayed):
            delta, source = float(delayed["tail"].min()), "shortest tail"
        else:
            delta, source = math.nan, ""
        rows.append({**row, "Delta": Delta, "delta": delta, "delta_source": source,
                     "bound": Delta - delta})
    return pd.DataFrame(rows, columns=cols)


def table3(df: pd.DataFrame, raw_dir=None) -> pd.DataFrame:
    """Tidy Table 3: one row per block x algorithm x max delay (see the module doc); with
    ``raw_dir`` also ``lateness``, ``tail`` (per cell) and ``Delta``, ``delta``,
    ``delta_source``, ``bound`` (per block)."""
    d = pap_rows(df)
    if raw_dir is not None:
        metrics = raw_metrics(raw_dir, d["cell_id"])
        d = d.merge(metrics, on="cell_id", how="left")
        d = d.merge(bounds(d.drop(columns=["lateness", "tail", "elapsed"]), metrics, df),
                     on=GROUP + ["size"], how="left")
    rows = []
    for key, g in d.groupby(GROUP + ["size"], sort=True):
        for mode, gm in by_mode(g):
            refs = gm[gm["label"] == REFERENCE].set_index("max_delay")
            ref = refs["mean"]
            for r in gm.itertuples(index=False):
                ring = float(ref.get(r.max_delay, math.nan))
                ring_lo = float(refs["ci_low"].get(r.max_delay, math.nan))
                ring_hi = float(refs["ci_high"].get(r.max_delay, math.nan))
                crowded = bool(r.oversubscribed)
                if r.label == REFERENCE:
                    verdict = ""
                elif crowded:
                    verdict = "oversubscribed"  # ranks shared cores: no win or loss drawn
                elif r.ci_high < ring_lo:
                    verdict = "faster"
                elif r.ci_low > ring_hi:
                    verdict = "slower"
                else:
                    verdict = "tie"  # the 95% CIs overlap
                rows.append({**dict(zip(GROUP + ["size"], key)), "mode": mode,
                             "label": r.label, "algorithm": r.algorithm,
                             "knowledge": r.knowledge, "max_delay": float(r.max_delay),
                             "mean": r.mean, "ci_low": r.ci_low, "ci_high": r.ci_high,
                             "n": r.n, "status": r.status, "ring_mean": ring,
                             "speedup": ring / r.mean if ring == ring else math.nan,
                             "better": verdict == "faster", "verdict": verdict,
                             **{c: getattr(r, c) for c in BOUND_COLUMNS if c in d.columns}})
    return pd.DataFrame(rows)


def table4(df: pd.DataFrame, algorithm: str = "prr") -> pd.DataFrame:
    """Tidy Table 4: ``algorithm`` (each knowledge variant) vs the ring per block, size and
    max delay: ``diff`` = mean - ring mean (seconds), ``speedup`` = ring / mean."""
    t3 = table3(df)
    if t3.empty:
        return pd.DataFrame()
    t = t3[t3["algorithm"] == algorithm].copy()
    t["diff"] = t["mean"] - t["ring_mean"]
    return t[GROUP + ["mode", "label", "size", "max_delay", "mean", "ring_mean", "diff",
                      "speedup", "better", "verdict", "status"]].reset_index(drop=True)
