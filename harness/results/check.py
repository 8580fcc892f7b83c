"""``harness check <campaign>``: the results store validated against itself.

Every finding names the file and what disagrees:

- every summary row has its run document, the cell in it, and (when it has repetitions) its
  raw repetitions in ``raw/<run>.parquet``;
- n, mean, CI, the median and its interval, p5, p95, the outlier count, the lag-1
  autocorrelation and the effective sample size recomputed from the raw repetitions equal the
  run document's (the distribution's statistics where the run document has them), and the
  summary equals the one the run documents give (``results.summary_frame``);
- the stopping point is the first repetition where the rule held (``ok``), and the rule held
  at none (``not-converged``);
- no cell twice in the summary, in a run document, or a repetition twice in a raw file;
- provenance present in every run that measured something;
- the job script's SHA-256 equal to the one the run recorded.

A run document that does not parse is rebuilt from its journal when the journal holds it
(``results.load_run_doc``); otherwise it is a finding.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

from .. import fileio, stats
from . import store as results

PROVENANCE_KEYS = ("library_version", "hosts", "harness", "python", "mpi4py", "jobscript_sha256")
# a simulation's (harness/simulate/bench.py): what simulated what, where, from which script
SIMULATED_PROVENANCE_KEYS = ("simulator", "platform", "hosts", "jobscript_sha256")
COMPARED = ("n", "mean", "ci_low", "ci_high")
DISTRIBUTION = ("median", "median_ci_low", "median_ci_high", "p5", "p95", "outliers", "lag1",
                "effective_n")


def _empty():
    import pandas as pd

    return pd.DataFrame({"cell_id": [], "rep": []})


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    cells: int = 0
    runs: int = 0
    repetitions: int = 0

    def add(self, where, text: str) -> None:
        self.problems.append(f"{where}: {text}")

    @property
    def ok(self) -> bool:
        return not self.problems


def _close(a, b, rel: float = 1e-9) -> bool:
    try:
        a, b = (math.nan if v is None else float(v) for v in (a, b))
    except (TypeError, ValueError):
        return False
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.isnan(a) and math.isnan(b) or a == b
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def _fmt(v) -> str:
    try:
        return "none" if v is None else f"{float(v):.9g}"
    except (TypeError, ValueError):
        return repr(v)


def _read_raw(path: Path, rep: Report):
    import pyarrow.parquet as pq

    if not path.is_file():
        return None
    try:
        return pq.read_table(path).to_pandas()
    except Exception as exc:  # pyarrow raises several types for damaged files
        rep.add(path, f"unreadable ({type(exc).__name__}); run `harness retry "
                      f"{path.parent.parent.name}` to measure its cells again")
        return False


def stopping_point(values, settings: dict) -> int | None:
    """The first repetition (1-based) at which the stopping rule held, or None."""
    rule = stats.StoppingRule(confidence=float(settings["confidence"]),
                              precision=float(settings["precision"]),
                              min_reps=int(settings["min_reps"]),
                              max_reps=int(settings["max_reps"]),
                              time_budget=float(settings.get("time_budget") or 1.0),
                              kind=settings.get("rule", "student-t"))
    running = stats.Running(rule)
    for k, v in enumerate(values, 1):
        running.add(float(v))
        if running.holds():
            return k
    return None


def _check_simulated(where: str, entry: dict, values, settings: dict, rep: Report) -> None:
    """A simulated cell's statistics recomputed as the simulation computes them
    (``stats.summarize_simulated``); ok exactly when its interval meets the precision."""
    st = entry.get("stats") or {}
    exact = (entry["cell"].get("delay") or "none") == "none"
    again = stats.summarize_simulated(values, float(settings["confidence"]), exact)
    for key in COMPARED:
        if not _close(st.get(key), again[key]):
            rep.add(where, f"{key} {_fmt(st.get(key))} in the run document, "
                           f"{_fmt(again[key])} from the raw repetitions")
    held = again["rel_halfwidth"] <= float(settings["precision"])
    if (entry["status"] == "ok") != held:
        rep.add(where, f"status {entry['status']} but the interval's relative half-width is "
                       f"{_fmt(again['rel_halfwidth'])} against a precision of "
                       f"{settings['precision']}")


def _check_entry(where: str, entry: dict, reps, settings: dict, rep: Report) -> None:
    st = entry.get("stats") or {}
    n = int(st.get("n") or 0)
    if reps is None or reps is False:
        if n and reps is None:
            rep.add(where, f"{n} repetitions in the run document, none in the raw file")
        return
    rows = reps.get(entry["cell_id"], _empty()).sort_values("rep")
    rep.repetitions += len(rows)
    if len(rows) != n:
        rep.add(where, f"{n} repetitions in the run document, {len(rows)} in the raw file")
        return
    if rows["rep"].duplicated().any():
        rep.add(where, "a repetition appears twice in the raw file")
    if entry["status"] not in results.TIMED or not n:
        return
    metric = entry.get("metric") or settings.get("metric", "mean")
    column = f"{metric}_elapsed"
    if column not in rows:
        rep.add(where, f"raw file lacks column {column}")
        return
    values = rows[column].to_numpy(float)
    if (entry.get("cell") or {}).get("platform"):  # simulated: exact, or rounds to precision
        _check_simulated(where, entry, values, settings, rep)
        return
    again = stats.summarize(values, float(settings["confidence"]))
    # the distribution's statistics too, where the run document has them (older ones do not)
    for key in COMPARED + tuple(k for k in DISTRIBUTION if k in st):
        if not _close(st.get(key), again[key]):
            rep.add(where, f"{key} {_fmt(st.get(key))} in the run document, "
                           f"{_fmt(again[key])} from the raw repetitions")
    stop = stopping_point(values, settings)
    if entry["status"] == "ok" and stop != n:
        rep.add(where, f"status ok after {n} repetitions, but the stopping rule first held at "
                       f"{stop if stop else 'none'}")
    if entry["status"] == "not-converged" and stop is not None:
        rep.add(where, f"status not-converged, but the stopping rule held at repetition {stop}")


def _check_run(store: results.CampaignStore, run_id: str, rep: Report,
               doc: dict | None = None) -> dict | None:
    if doc is None:
        try:
            doc = results.load_run_doc(store, run_id, log=rep.recovered.append)
        except results.StoreError as exc:
            rep.problems.append(str(exc))
            return None
    rep.runs += 1
    path = store.run_doc(run_id)
    settings = doc.get("settings") or {}
    ids = [c["cell_id"] for c in doc["cells"]]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        rep.add(path, f"cell {dup} appears {ids.count(dup)} times")
    measured = any((c.get("stats") or {}).get("n") for c in doc["cells"])
    prov = doc.get("provenance") or {}
    if measured:
        keys = SIMULATED_PROVENANCE_KEYS if prov.get("simulated") else PROVENANCE_KEYS
        missing = [k for k in keys if not prov.get(k)]
        if missing:
            rep.add(path, f"provenance lacks {', '.join(missing)}")
        script = store.job_script(run_id)
        if prov.get("jobscript_sha256"):
            if not script.is_file():
                rep.add(script, "job script missing")
            elif hashlib.sha256(script.read_bytes()).hexdigest() != prov["jobscript_sha256"]:
                rep.add(script, "SHA-256 differs from the one the run recorded "
                                f"({prov['jobscript_sha256'][:12]}…): the script changed after "
                                "the run")
    reps = _read_raw(store.raw(run_id), rep)
    if reps is not None and reps is not False:
        reps = {cid: g for cid, g in reps.groupby("cell_id", sort=False)}
    for entry in doc["cells"]:
        _check_entry(f"{path} cell {entry['cell_id']}", entry, reps, settings, rep)
    return doc


def check_store(store: results.CampaignStore, runs=None, keep=None, docs=None) -> Report:
    """Validate ``store``; ``runs`` / ``keep``: the run and cell ids of the campaign's plan
    (default: every run document, every cell of the summary); ``docs``: the run documents
    the summary was just built from (``results.load_run_docs``), checked as they were read
    (default: read now)."""
    import pandas as pd

    rep = Report()
    if not store.summary.is_file():
        rep.add(store.summary, "missing (run the campaign, or `snakemake` to aggregate)")
        return rep
    try:
        summary = pd.read_csv(store.summary)
    except Exception as exc:
        rep.add(store.summary, f"unreadable ({type(exc).__name__}); `snakemake` rebuilds it "
                               "from runs/")
        return rep
    rep.cells = len(summary)
    for dup in sorted(summary.loc[summary["cell_id"].duplicated(), "cell_id"].unique()):
        rep.add(store.summary, f"cell {dup} appears more than once")
    run_ids = sorted(runs) if runs is not None else sorted(
        p.stem for p in (store.dir / "runs").glob("*.json"))
    snapshot, docs = docs, {}
    for run_id in run_ids:
        if snapshot is not None:
            if run_id in snapshot:
                docs[run_id] = _check_run(store, run_id, rep, snapshot[run_id])
        elif store.run_doc(run_id).is_file():
            docs[run_id] = _check_run(store, run_id, rep)
    # every summary row: its run document holds the cell
    for row in summary.itertuples(index=False):
        doc = docs.get(row.run_id) if isinstance(row.run_id, str) else None
        if doc is None and isinstance(row.run_id, str) and row.run_id not in docs:
            rep.add(store.summary, f"cell {row.cell_id}: run document "
                                   f"{store.run_doc(row.run_id)} missing")
        elif doc is not None and row.cell_id not in {c["cell_id"] for c in doc["cells"]}:
            rep.add(store.summary, f"cell {row.cell_id}: not in run document {row.run_id}")
    # the summary equals the one the run documents give
    keep = set(summary["cell_id"]) if keep is None else keep
    try:
        again = results.summary_frame(store, keep=keep, runs=runs,
                                      docs=snapshot).set_index("cell_id")
    except results.StoreError:
        return rep  # already a finding
    mine = summary.set_index("cell_id")
    for cid in sorted(set(again.index) - set(mine.index)):
        rep.add(store.summary, f"cell {cid} of the run documents is missing")
    for cid in sorted(set(mine.index) - set(again.index)):
        rep.add(store.summary, f"cell {cid} has no result in the run documents")
    for cid in sorted(set(mine.index) & set(again.index)):
        a, b = mine.loc[cid], again.loc[cid]
        if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
            continue  # a duplicate: already a finding
        if str(a["status"]) != str(b["status"]):
            rep.add(store.summary, f"cell {cid}: status {a['status']} in the summary, "
                                   f"{b['status']} in the run documents")
        for key in COMPARED:
            if not _close(a[key], b[key]) and not (pd.isna(a[key]) and pd.isna(b[key])):
                rep.add(store.summary, f"cell {cid}: {key} {_fmt(a[key])} in the summary, "
                                       f"{_fmt(b[key])} from the run documents")
    return rep


def render(store: results.CampaignStore, rep: Report) -> str:
    lines = [f"recovered: {r}" for r in rep.recovered]
    lines += rep.problems
    verdict = (f"{store.dir}: consistent" if rep.ok else
               f"{store.dir}: {len(rep.problems)} problem(s)")
    lines.append(f"{verdict} ({rep.cells} cells, {rep.runs} runs, {rep.repetitions} "
                 f"repetitions checked)")
    return "\n".join(lines)


def write(store: results.CampaignStore, rep: Report) -> Path:
    """``check.json`` beside the summary: the findings, for the report and for tools."""
    path = store.dir / "check.json"
    fileio.write_json(path, {"ok": rep.ok, "problems": rep.problems,
                              "recovered": rep.recovered, "cells": rep.cells, "runs": rep.runs,
                              "repetitions": rep.repetitions, "checked": results.now()})
    return path


__all__ = ["Report", "check_store", "render", "stopping_point", "write"]
