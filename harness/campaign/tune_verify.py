"""Verification of a campaign's tuning (``harness tune verify``, rule ``verify_tuned``).

Per library, fresh launches measure AUTO (``native:auto``) against ``native:tuned`` (the
library following the campaign's tuning file), interleaved, at every measured (P, size) and
at held-out points: the geometric midpoint between neighbouring measured sizes (rounded to
whole elements) and, when the campaign has three or more P values, the P nearest the
geometric midpoint of the first two that was not measured. At measured points BEST (the
campaign's fastest forced algorithm there) is measured too, and for Intel MPI its own
autotuner (``native:autotuner``).

Per P and round the launch order is A T B1..Bn U U Bn..B1 T A (B: each BEST algorithm; U:
the autotuner), so every pair compared is symmetric in time and linear drift cancels over a
round. Ratios come from paired launch means as in the confirmation stage
(``harness.campaign.confirm.gain_interval``): ``gain`` = AUTO / tuned, ``vs_best`` = tuned / BEST,
``vs_autotuner`` = autotuner / tuned, each with its 95 % interval. Verdicts: ``tuned faster``
(the gain's interval above 1), ``AUTO faster`` (below 1), ``tie``; ``oversubscribed``
launches are measured and marked, and no win or loss is drawn from them. Beside the gain,
as in the confirmation, the exact Wilcoxon signed-rank test of the paired launch medians of
AUTO and tuned (``harness.analysis.paired``: ``median_gain``, ``wilcoxon_p``,
``rank_biserial``, ``smallest_p``, ``nonparametric``); ``verdict_test`` names the test the
verdict used.

Launches are stored under ``results/<c>/tuning/verify/``; an interrupted stage keeps every
complete launch. Output: ``results/<c>/tuning/verify-<library>.json``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import cells, fileio, paths
from ..analysis import paired
from ..analysis.vocabulary import AUTO
from ..results import store as results
from ..tuning import Table
from . import plan, tune
from .confirm import USABLE, VERDICT_TEST, gain_interval, launch_in_order

LAUNCH_BASE = 200  # launch indices of verification runs (campaign 0..R-1, confirmation 100+)
TUNED, AUTOTUNER = cells.SELECTORS  # the library selecting by the tuned file, its autotuner


def held_out_sizes(sizes: list[int], itemsize: int) -> list[int]:
    """The geometric midpoint of each pair of neighbouring sizes, in whole elements."""
    out = []
    for a, b in zip(sizes, sizes[1:]):
        m = int(round(math.sqrt(a * b) / itemsize)) * itemsize
        if a < m < b:
            out.append(m)
    return out


def held_out_procs(procs: list[int]) -> int | None:
    """With three or more measured P: the unmeasured P nearest the geometric midpoint of
    the first pair of neighbours that has one between them."""
    if len(procs) < 3:
        return None
    for a, b in zip(procs, procs[1:]):
        m = int(round(math.sqrt(a * b)))
        for cand in sorted(range(a + 1, b), key=lambda x: abs(x - m)):
            return cand
    return None


def points(decisions: pd.DataFrame, itemsize: int) -> list[dict]:
    """Every point to verify: measured (with BEST) and held out."""
    out = []
    procs = sorted(int(p) for p in decisions.procs.unique())
    for p in procs:
        d = decisions[decisions.procs == p].sort_values("size")
        sizes = [int(s) for s in d["size"]]
        for r in d.itertuples():
            best = r.best if isinstance(r.best, str) and cells.kind_of(r.best) == "native" else ""
            out.append({"procs": p, "size": int(r.size), "held_out": False,
                        "best": "" if best == AUTO else best})
        out += [{"procs": p, "size": s, "held_out": True, "best": ""}
                for s in held_out_sizes(sizes, itemsize)]
    hp = held_out_procs(procs)
    if hp is not None:
        below = max(p for p in procs if p < hp)
        sizes = sorted(int(s) for s in decisions[decisions.procs == below]["size"])
        out += [{"procs": hp, "size": s, "held_out": True, "best": ""} for s in sizes]
    return sorted(out, key=lambda e: (e["procs"], e["size"]))


def schedule(bests: list[str], autotuner: bool, rounds: int) -> list[str]:
    middle = bests + ([AUTOTUNER, AUTOTUNER] if autotuner else []) + bests[::-1]
    return ([AUTO, TUNED] + middle + [TUNED, AUTO]) * rounds


def _ratio(a: list[float], b: list[float], confidence: float):
    pairs = [(x, y) for x, y in zip(a, b) if math.isfinite(x) and math.isfinite(y)]
    if not pairs:
        return math.nan, math.nan, math.nan, 0
    g, lo, hi = gain_interval([p[0] for p in pairs], [p[1] for p in pairs], confidence)
    return g, lo, hi, len(pairs)


def run_library(campaign, library: str, out: Path, log=print) -> dict:
    """Verify ``library``'s tuning for ``campaign`` (a ``harness.campaign.workflow.Campaign``). When
    the verification finds AUTO faster at a held-out point a rule covers, the rule is cut
    there (``harness.campaign.tune.exclude``), the files are written again and verified again (once);
    the document keeps the first pass."""

    earlier = tune.refined_points(out)  # cuts an earlier verification made (harness tune keeps them)
    doc = _verify(campaign, library, LAUNCH_BASE, log)
    bad = [(e["procs"], e["size"]) for e in doc["entries"]
           if e["held_out"] and e["expected"] != "auto" and e["verdict"] == "AUTO faster"]
    doc["refined"] = [{"procs": p, "size": s} for p, s in earlier]
    if bad:
        log(f"verify {library}: AUTO faster at held-out " + ", ".join(
            f"P={p} {s} B" for p, s in bad) + "; cutting the rules there and verifying again")
        cuts = sorted(set(earlier) | set(bad))
        tune.tune(paths.results_root(), campaign.cfg.campaign, log=log, only=library,
                  avoid=cuts)
        first = doc
        doc = _verify(campaign, library, LAUNCH_BASE + 400, log)
        doc.update(refined=[{"procs": p, "size": s} for p, s in cuts],
                   first_pass=first["entries"], first_table=first["table"])
    fileio.write_json(out, doc)
    return doc


@dataclass(frozen=True)
class _Pass:
    """One verification pass of ``library``'s tuning: the points, the installation, the
    settings of its launches and the tuning they follow (``tag``)."""

    campaign: object  # harness.campaign.workflow.Campaign
    library: str
    tdoc: dict  # tuning/<library>.json
    points: list
    lib: object  # the installation
    settings: dict

    @classmethod
    def of(cls, campaign, library: str) -> _Pass:
        cfg, tdir = campaign.cfg, campaign.store.dir / "tuning"
        tdoc = json.loads((tdir / f"{library}.json").read_text())
        decisions = pd.read_csv(tdir / "decisions.csv")
        pts = points(decisions[decisions.library == library],
                     int(np.dtype(tdoc["condition"]["dtype"]).itemsize))
        if cfg.tune.get("procs"):
            pts = [e for e in pts if e["procs"] in set(cfg.tune["procs"])]
        return cls(campaign, library, tdoc, pts, plan.library_for(cfg, library),
                   {**campaign.settings(), "time_budget": cfg.confirm["time_budget"]})

    @property
    def cond(self) -> dict:
        return self.tdoc["condition"]

    @property
    def autotuner(self) -> bool:
        return AUTOTUNER in self.lib.selector_names()

    @property
    def rounds(self) -> int:
        return int(self.campaign.cfg.tune["rounds"])

    @property
    def tuned_params(self) -> tuple:
        return (("tuning", self.campaign.cfg.campaign),)

    @property
    def nodes(self) -> int:
        return int(self.cond.get("nodes") or 1)

    def cell(self, alg: str, p: int, size: int) -> cells.Cell:
        return cells.Cell(self.library, alg, p, size, self.cond["dtype"], self.cond["op"], "none",
                          0.0, 1, self.nodes, self.tuned_params if alg == TUNED else (),
                          "single", self.cond["timing"])

    def launches(self, base: int) -> list[tuple[dict, cells.Run]]:
        """(settings, run) of every launch, in order: per P, ``schedule``'s algorithms, each
        at its points; launch indices from ``base``."""
        out, index = [], base
        tag = f"{self.campaign.cfg.campaign}@{self.tdoc.get('digest', '')}"
        for p in sorted({e["procs"] for e in self.points}):
            here = [e for e in self.points if e["procs"] == p]
            bests = sorted({e["best"] for e in here if e["best"]})
            for alg in schedule(bests, self.autotuner, self.rounds):
                mine = [e for e in here if alg in (AUTO, TUNED, AUTOTUNER) or e["best"] == alg]
                env = dict(plan.launch_env(self.lib, alg, self.tuned_params if alg == TUNED else ()))
                env["HARNESS_TUNING"] = tag  # every launch of the pass: a new table, new launches
                out.append((self._settings(alg), cells.Run(
                    library=self.library, env=tuple(sorted(env.items())), procs=p,
                    nodes=self.nodes, cells=tuple(self.cell(alg, p, e["size"]) for e in mine),
                    thread_level="single", launch=index)))
                index += 1
        return out

    def _settings(self, alg: str) -> dict:
        if alg != AUTOTUNER:
            return self.settings
        # the autotuner tries its candidates during the warm-up
        warmup = max(int(self.settings.get("warmup", 0)),
                     int(self.campaign.cfg.tune["autotuner_warmup"]))
        return {**self.settings, "warmup": warmup}


@dataclass
class _Measured:
    """Per (algorithm, P, size) the launch means and medians (NaN where a launch gave
    none), and per P whether a launch was oversubscribed."""

    means: dict = field(default_factory=dict)
    medians: dict = field(default_factory=dict)
    crowded: dict = field(default_factory=dict)

    def add(self, doc: dict, procs: int) -> None:
        self.crowded[procs] = self.crowded.get(procs, False) or bool(
            results.oversubscribed(doc.get("provenance") or {}))
        for c in doc["cells"]:
            st = c.get("stats") or {}
            ok = c["status"] in USABLE and st.get("mean")
            key = (c["cell"]["algorithm"], int(c["cell"]["procs"]), int(c["cell"]["size"]))
            self.means.setdefault(key, []).append(float(st["mean"]) if ok else math.nan)
            self.medians.setdefault(key, []).append(float(st.get("median") or math.nan) if ok
                                                    else math.nan)


def _verify(campaign, library: str, base: int, log) -> dict:
    """One pass: every launch of ``_Pass.launches``, then an entry per point."""
    cfg, one = campaign.cfg, _Pass.of(campaign, library)
    store = results.CampaignStore(campaign.store.dir / "tuning", "verify")
    launches, measured = one.launches(base), _Measured()
    for run_settings, run in launches:
        measured.add(next(launch_in_order(store, one.lib, [run], run_settings, cfg,
                                          f"verify {library} P={run.procs}", log)), run.procs)
    table = Table.from_dict(one.tdoc["table"])
    conf = float(cfg.stopping["confidence"])
    entries = [_entry(e, table.lookup(e["procs"], e["size"]), measured, one.autotuner, conf)
               for e in one.points]
    return {"campaign": cfg.campaign, "library": library, "condition": one.cond,
            "table": one.tdoc["table"], "rounds": one.rounds, "launches": len(launches),
            "finished": results.now(), "entries": entries}


def _entry(e: dict, chosen, measured: _Measured, autotuner: bool, conf: float) -> dict:
    """The verdict at point ``e`` (``chosen``: what the table runs there, None for AUTO)."""
    p, s = e["procs"], e["size"]
    means = measured.means
    a, t = means.get((AUTO, p, s), []), means.get((TUNED, p, s), [])
    g, lo, hi, n = _ratio(a, t, conf)
    entry = {**e, "expected": chosen or "auto", "auto_means": a, "tuned_means": t,
             "auto_mean": _mean(a), "tuned_mean": _mean(t), "gain": g, "gain_ci_low": lo,
             "gain_ci_high": hi, "pairs": n, "oversubscribed": measured.crowded.get(p, False),
             "verdict_test": VERDICT_TEST}
    # beside it, no assumption on the distribution: the paired launch medians
    ranked = paired.compare(measured.medians.get((AUTO, p, s), []),
                            measured.medians.get((TUNED, p, s), []), names=("AUTO", "tuned"))
    entry.update(median_gain=ranked["ratio"], wilcoxon_p=ranked["p"],
                 rank_biserial=ranked["rank_biserial"], smallest_p=ranked["smallest_p"],
                 nonparametric=ranked["verdict"], nonparametric_test=ranked["test"])
    if e["best"]:
        b = means.get((e["best"], p, s), [])
        r, rlo, rhi, _ = _ratio(t, b, conf)
        entry.update(best_means=b, best_mean=_mean(b), vs_best=r, vs_best_ci_low=rlo,
                     vs_best_ci_high=rhi)
    elif not e["held_out"]:  # AUTO is BEST there
        entry.update(best="native:auto", best_mean=entry["auto_mean"],
                     vs_best=1 / g if g else math.nan,
                     vs_best_ci_low=1 / hi if hi else math.nan,
                     vs_best_ci_high=1 / lo if lo else math.nan)
    if autotuner:
        u = means.get((AUTOTUNER, p, s), [])
        r, rlo, rhi, _ = _ratio(u, t, conf)
        entry.update(autotuner_means=u, autotuner_mean=_mean(u), vs_autotuner=r,
                     vs_autotuner_ci_low=rlo, vs_autotuner_ci_high=rhi)
    entry["verdict"] = ("oversubscribed" if entry["oversubscribed"] else
                        "no data" if n == 0 else
                        "tuned faster" if lo > 1 else "AUTO faster" if hi < 1 else "tie")
    return entry


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if math.isfinite(x)]
    return float(np.mean(xs)) if xs else math.nan
