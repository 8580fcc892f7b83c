"""Castelló et al.'s cost models (Table 1) and the data they are held against: the THEO, OVL
and NOVL variants of each algorithm (``parts``, ``variants``), the measured native cells of
their five algorithms (``measured``), the models beside the measurements (``model_table``) and
the network parameters of this machine beside the papers' (``params_table``), and the
models' curves of Castelló et al.'s Fig. 1 (``fig1_curves``). Drawn and written
by ``harness/report/castello_models.py``.

**Table 1 in bytes.** The paper counts n data items per process, beta in items/s and gamma in
additions/s. With m = bytes per process (the summary's ``size``), alpha [s], beta [s/B] (the
ping-pong slope) and gamma [s/B] (the reduce_local slope) every item count becomes a byte count,
``n/beta_items = m*beta`` and ``n/gamma_ops = m*gamma``, so (log p = log2 p, real-valued):

====  ==============  ==================================  ================
alg.  latency (x a)   bandwidth (x beta, bytes)           arithmetic (x g)
====  ==============  ==================================  ================
RDB   log p           m log p                             m log p
RSA   2 log p         2 m (p-1)/p                         m (p-1)/p
LIN   2 (p-1)         2 m (p-1)                           m (p-1)
RNG   2 (p-1)         2 m (p-1)/p                         m (p-1)/p
SRG   2p + s - 3      (p+s-2) m/s + (p-1) m/p             (p+s-2) m/s
====  ==============  ==================================  ================

SRG's s is the number of segments of the message, ``ceil(m / segment)``, with the segment
size the campaign forces on Open MPI's segmented ring (``harness/data/libraries.yaml``).

**THEO, OVL, NOVL** (Fig. 3). Write a model as L + B + A (its latency, bandwidth and arithmetic
parts above). THEO = L + B + A is Table 1: a step's send and receive overlap (the cost of
IRecv+Send is that of one Send) and the reduction follows the transfer. OVL = L + max(B, A):
everything overlapped, the two directions of a step and the reduction of the received block
with the next transfer. NOVL = 2L + 2B + A: no overlap at all, each step sends, then
receives (two messages, each paying alpha and its bytes), then reduces. So OVL <= THEO <= NOVL.

Throughput as in the paper: MiB/s = m / time / 2^20.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .. import models
from ..libraries import get_library
from ..models import maxrate
from . import netparams
from .auto_vs_best import prepare
from .vocabulary import timed_mask

ALGORITHMS = ("RDB", "RSA", "LIN", "RNG", "SRG")
# Castelló et al.'s algorithms as the native algorithms of each library (Table 2)
NATIVE = {
    "openmpi": {"RDB": "native:recursive_doubling", "RSA": "native:rabenseifner",
                "LIN": "native:basic_linear", "RNG": "native:ring",
                "SRG": "native:segmented_ring"},
    "mpich": {"RDB": "native:recursive_doubling", "RSA": "native:reduce_scatter_allgather",
              "RNG": "native:ring"},
    "impi": {"RDB": "native:recursive_doubling", "RSA": "native:rabenseifner",
             "RNG": "native:ring"},
}
SEGMENT_ENV = "OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize"
# Castelló et al., Sect. 3.3 / 4: alpha = 2 us, beta = 11,770 MB/s, gamma = 8e9 FP32 flop/s
CASTELLO = {"alpha": 2e-6, "beta": 1 / 11.77e9, "gamma": 1 / (8e9 * 4)}
MIB = float(2**20)


# --------------------------------------------------------------------------- models


def segments(m: float, segment: float) -> float:
    """SRG's s: segments of the whole message (at least 1)."""
    return max(1.0, math.ceil(float(m) / float(segment)))


def parts(alg: str, p: float, m: float, alpha: float, beta: float, gamma: float,
          segment: float = 65536, s: float | None = None) -> tuple[float, float, float]:
    """(L, B, A) of Table 1 in seconds for ``p`` processes and ``m`` bytes per process. SRG's
    segment count is ``s`` when given (Fig. 1 fixes s = 24), else ``ceil(m / segment)``."""
    p, m = float(p), float(m)
    if p < 2:
        return 0.0, 0.0, 0.0
    lg = math.log2(p)
    f = (p - 1) / p
    if alg == "RDB":
        return lg * alpha, m * lg * beta, m * lg * gamma
    if alg == "RSA":
        return 2 * lg * alpha, 2 * m * f * beta, m * f * gamma
    if alg == "LIN":
        return 2 * (p - 1) * alpha, 2 * m * (p - 1) * beta, m * (p - 1) * gamma
    if alg == "RNG":
        return 2 * (p - 1) * alpha, 2 * m * f * beta, m * f * gamma
    if alg == "SRG":
        s = segments(m, segment) if s is None else float(s)
        return ((2 * p + s - 3) * alpha, ((p + s - 2) * m / s + (p - 1) * m / p) * beta,
                (p + s - 2) * m / s * gamma)
    raise ValueError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {alg!r}")


def variants(alg, p, m, alpha, beta, gamma, segment=65536, s=None) -> dict:
    """THEO, OVL, NOVL times (s) of one algorithm (module doc)."""
    L, B, A = parts(alg, p, m, alpha, beta, gamma, segment, s)
    return {"THEO": L + B + A, "OVL": L + max(B, A), "NOVL": 2 * L + 2 * B + A}


def mibs(m, t):
    return float(m) / float(t) / MIB if t > 0 else math.nan


def model_mibs(alg, p, sizes, pp: dict, gamma, variant="THEO", segment=65536) -> list[float]:
    """A model line: ``variant``'s throughput (MiB/s) of ``alg`` at P = ``p`` over ``sizes``
    with the ping-pong fit ``pp``'s alpha and beta and ``gamma``."""
    return [mibs(x, variants(alg, p, x, pp["alpha"], pp["beta"], gamma, segment)[variant])
            for x in sizes]


def size_grid(lo, hi, per_octave=4):
    """Powers of two from ``lo`` to ``hi`` (at least 1), ``per_octave`` per doubling: the
    message sizes a model line is drawn at."""
    lo, hi = max(1.0, float(lo)), max(float(lo), float(hi))
    k = np.arange(math.floor(math.log2(lo) * per_octave), math.ceil(math.log2(hi) * per_octave) + 1)
    return 2.0 ** (k / per_octave)


FIG1 = {"p": 50, "n": 16 * 2**20, "s": 24, "delta": 1.0}


def fig1_curves(alpha: float, beta: float, gamma: float) -> dict:
    """Castelló et al., Fig. 1: THEO MiB/s (n / time) of each algorithm in four sweeps, with
    the other three of n, p, beta and delta (gamma' = gamma / delta in s/B) fixed at ``FIG1``.
    Returns {panel: (x values, {alg: MiB/s})}; bandwidth x values are 1/beta in B/s (100 MB/s
    to 316 GB/s, the same for every parameter set; ``beta`` is used by the other panels)."""
    p0, n0, s = FIG1["p"], FIG1["n"], FIG1["s"]
    sweeps = {
        "size": (size_grid(2**4, 2**28, 2), lambda x: (p0, x, beta, gamma)),
        "nodes": (np.unique(np.round(2.0 ** (np.arange(2, 17) / 2))).astype(float),
                  lambda x: (x, n0, beta, gamma)),
        "bandwidth": (np.logspace(8, 11.5, 29), lambda x: (p0, n0, 1 / x, gamma)),
        "delta": (2.0 ** (np.arange(-12, 17) / 4), lambda x: (p0, n0, beta, gamma / x)),
    }
    out = {}
    for panel, (xs, arg) in sweeps.items():
        ys = {}
        for alg in ALGORITHMS:
            ys[alg] = np.array([mibs(arg(x)[1], variants(alg, arg(x)[0], arg(x)[1], alpha,
                                                           arg(x)[2], arg(x)[3], s=s)["THEO"])
                                for x in xs])
        out[panel] = (np.asarray(xs, dtype=float), ys)
    return out


# --------------------------------------------------------------------------- data


def fig5_lines(df: pd.DataFrame, doc: dict, ppns) -> dict:
    """Bienz et al., Fig. 5 as data, from ``doc``'s max-rate fit: its ``params``, the
    ``library`` fitted, that library's ping-pong rows (``points``), the sizes a line is drawn at
    (``sizes``, over ``lo``..``hi``), the modelled time of one message per fitted level
    (``levels``: socket, node) and at the network level per ppn (``network``), whether the
    network level was fitted (``net_fitted``), else where its parameters came from
    (``net_from``)."""
    mr = maxrate.MaxRateParams.from_dict(doc)
    prov = doc["maxrate"].get("provenance", {})
    lib, levels = prov.get("library"), prov.get("levels", {})
    pp = netparams.pingpong_rows(df)
    pp = pp[pp["library"] == lib] if lib else pp
    lo = float(pp["size"].min()) if len(pp) else 8.0
    hi = float(pp["size"].max()) if len(pp) else 2.0**26
    xs = size_grid(lo, hi)
    fitted = {lv: f for lv, f in levels.items() if f and "error" not in f}
    why = prov.get("fallbacks", {}).get("alpha, R_b", "")
    return {"params": mr, "library": lib, "points": pp, "sizes": xs, "lo": lo, "hi": hi,
            "levels": {lv: [fitted[lv]["alpha"] + fitted[lv]["beta"] * x for x in xs]
                       for lv in ("socket", "node") if lv in fitted},
            "network": {k: [mr.alpha + maxrate.injection_time(x, k, mr) for x in xs] for k in ppns},
            "net_fitted": "network" in fitted,
            "net_from": why.split(":= ")[-1] if ":=" in why else "fallback"}


def segment_size(library: str) -> float:
    try:
        env = get_library(library).native("native:segmented_ring").env
        return float(env.get(SEGMENT_ENV, 65536)) or 65536.0
    except (KeyError, ValueError, OSError):
        return 65536.0


def measured(df: pd.DataFrame) -> pd.DataFrame:
    """The timed, undelayed native rows of the mapped algorithms, with column ``alg``
    (RDB, ...); op sum and the most frequent dtype."""
    d = prepare(df)
    d = d[timed_mask(d) & (d["delay"] == "none") & (d["max_delay"] == 0)]
    names = {(lib, nat): a for lib, m in NATIVE.items() for a, nat in m.items()}
    d = d.assign(alg=[names.get((lib, a)) for lib, a in zip(d["library"], d["algorithm"])])
    d = d[d["alg"].notna()]
    if len(d):
        d = d[d["op"] == "sum"] if (d["op"] == "sum").any() else d
        d = d[d["dtype"] == d["dtype"].mode().iloc[0]]
    return d.reset_index(drop=True)


def params_doc(summary_csv, params_json) -> dict:
    if params_json is not None and Path(params_json).is_file():
        return json.loads(Path(params_json).read_text())
    return netparams.fit_file(summary_csv)


def pingpong_for(doc: dict, library: str) -> tuple[dict, str]:
    pp = doc.get("pingpong") or {}
    if not pp:
        raise netparams.FitError("the parameter file has no 'pingpong' section: the campaign "
                                 "needs pingpong cells (harness fit)")
    if library in pp:
        return pp[library], library
    other = netparams.PREFERRED_LIBRARY if netparams.PREFERRED_LIBRARY in pp else sorted(pp)[0]
    return pp[other], other


def machine_params(doc: dict | None) -> tuple[dict | None, dict, str]:
    """This machine's alpha, beta, gamma (Fig. 1) from ``doc``'s ping-pong fit of the preferred
    library (``pingpong_for``): (the parameters, the fit, its library); the parameters None
    where the fit has beta = 0 (sizes too close to tell the bandwidth) or there is no gamma,
    and (None, {}, "") without a fit."""
    if not (doc and doc.get("pingpong")):
        return None, {}, ""
    pp, src = pingpong_for(doc, netparams.PREFERRED_LIBRARY)
    g = pp.get("gamma") or doc.get("gamma")
    if not pp.get("beta", 0) > 0 or not g:
        return None, pp, src
    return {"alpha": pp["alpha"], "beta": pp["beta"], "gamma": g}, pp, src


def model_table(meas: pd.DataFrame, doc: dict) -> pd.DataFrame:
    """One row per measured (library, P, algorithm, size): measured and modelled."""
    rows = []
    gamma_all = float(doc["gamma"])
    for r in meas.itertuples(index=False):
        pp, src = pingpong_for(doc, r.library)
        g = pp.get("gamma") or gamma_all
        v = variants(r.alg, r.procs, r.size, pp["alpha"], pp["beta"], g, segment_size(r.library))
        real = mibs(r.size, r.mean)
        rows.append({"library": r.library, "procs": int(r.procs), "algorithm": r.alg,
                     "native": r.algorithm, "size": int(r.size), "mean": float(r.mean),
                     "real_mibs": real, "theo_mibs": mibs(r.size, v["THEO"]),
                     "ovl_mibs": mibs(r.size, v["OVL"]), "novl_mibs": mibs(r.size, v["NOVL"]),
                     "real_over_theo": real / mibs(r.size, v["THEO"]),
                     "theo_time": v["THEO"], "params_from": f"ping-pong {src}",
                     "oversubscribed": bool(r.oversubscribed)})
    cols = ["library", "procs", "algorithm", "native", "size", "mean", "real_mibs", "theo_mibs",
            "ovl_mibs", "novl_mibs", "real_over_theo", "theo_time", "params_from", "oversubscribed"]
    t = pd.DataFrame(rows, columns=cols)
    if len(t):
        t["_o"] = t["algorithm"].map(ALGORITHMS.index)
        t = t.sort_values(["library", "procs", "_o", "size"]).drop(columns="_o")
    return t.reset_index(drop=True)


def params_table(doc: dict) -> pd.DataFrame:
    """The fitted parameters of each library beside Castelló's and SUARA Table 4's."""
    rows = []
    for lib, f in (doc.get("pingpong") or {}).items():
        rows.append({"source": f"this machine, {lib} ping-pong ({f['level']})", "alpha": f["alpha"],
                     "beta": f["beta"], "gamma": f.get("gamma") or doc["gamma"], "r2": f["r2"],
                     "n": f["n"]})
    mr = doc.get("maxrate")
    if mr:
        rows.append({"source": f"this machine, max-rate ({mr['provenance']['library']}): "
                               f"alpha, 1/R_b; R_N {mr['R_N'] / 1e9:.3g} GB/s",
                     "alpha": mr["alpha"], "beta": 1 / mr["R_b"], "gamma": mr["gamma"],
                     "r2": math.nan, "n": math.nan})
    rows.append({"source": "Castelló et al. (ALTEC, InfiniBand EDR)", **CASTELLO,
                 "r2": math.nan, "n": math.nan})
    rows.append({"source": "SUARA Table 4 (Shaheen-II, rs)", "alpha": models.PAPER_ALPHA_RS,
                 "beta": models.PAPER_BETA_RS, "gamma": models.PAPER_GAMMA, "r2": math.nan,
                 "n": math.nan})
    return pd.DataFrame(rows)
