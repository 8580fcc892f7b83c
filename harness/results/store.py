"""The results store of a campaign, ``results/<campaign>/``:

- ``jobs/<run>.sh`` and ``jobs/<run>.json``: the rendered job script and the run's spec;
- ``raw/<run>.parquet``: one row per repetition (per-rank arrival, finish and delay);
- ``progress/<run>.json``: the run's journal, rewritten after every cell; a rerun of the
  run (after an interrupt, a failure, or a forced rerun) resumes from it and measures only
  the cells it lacks (``harness run`` deletes it and measures anew);
- ``runs/<run>.json``: provenance of the run and status + statistics of each of its cells,
  there once the run is over (complete, failed or timeout);
- ``summary.csv``: one row per cell, rebuilt from ``runs/*.json`` (newest result of a cell
  wins, so a rerun of a cell replaces its older row).

Every write goes to a temporary file in the same directory, then is renamed into place
(``fileio``).
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from ..errors import StoreError
from .auto_ran import attach as attach_auto_ran
from ..fileio import atomic_write_text, read_json, write_json
from .launches import LAUNCH_COLUMNS, bus_bandwidth, combine_frame
from ..stats import autocorrelated, normality_p

# not-applicable: outside the catalogue's `applies` condition of the cell's native algorithm,
# decided by the plan (harness.campaign.plan.NotApplicable), never launched, no time
STATUSES = ("ok", "wrong", "timeout", "failed", "not-converged", "not-applicable")

SUMMARY_COLUMNS = [
    "campaign", "cell_id", "run_id", "library", "library_version", "algorithm", "procs",
    "nodes", "size", "count", "dtype", "op", "delay", "max_delay", "late_rank", "params",
    "thread_level", "timing", "buffers", "launch", "oversubscribed", "shared_cpu", "involuntary_switches", "record", "metric", "n", "mean", "ci_low", "ci_high", "rel_halfwidth", "std", "median",
    "median_ci_low", "median_ci_high", "min", "max", "normality_p", "p5", "p95", "outliers",
    "lag1", "effective_n", "ci_method", "t_rejected", "converged", "status",
    "error", "algbw", "busbw", "warmup", "seed", "host", "git_commit", "config_hash",
    "finished", "launches", "launch_means", "launches_disagree", "odd_launches", "within_mean",
    "within_ci_low", "within_ci_high", "within_rel_halfwidth", "within_n", "auto_ran",
    # a simulated cell (harness/simulate/bench.py): the platform's id, the simulator, what the
    # number copies (SMPI's copy of a library's algorithm, or the harness's own, unchanged)
    "simulated", "platform", "simulator", "copies",
]


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class CampaignStore:
    """Paths of one campaign's results."""

    def __init__(self, root: Path, campaign: str):
        self.campaign = campaign
        self.dir = Path(root) / campaign

    @classmethod
    def of_spec(cls, spec_path) -> "CampaignStore":
        """The store a run spec (``jobs/<run>.json``, ``job_spec``) belongs to."""
        jobs = Path(spec_path).resolve().parent
        return cls(jobs.parent.parent, jobs.parent.name)

    def job_script(self, run_id: str) -> Path:
        return self.dir / "jobs" / f"{run_id}.sh"

    def job_spec(self, run_id: str) -> Path:
        return self.dir / "jobs" / f"{run_id}.json"

    def raw(self, run_id: str) -> Path:
        return self.dir / "raw" / f"{run_id}.parquet"

    def run_doc(self, run_id: str) -> Path:
        return self.dir / "runs" / f"{run_id}.json"

    def progress(self, run_id: str) -> Path:
        return self.dir / "progress" / f"{run_id}.json"

    def log(self, run_id: str) -> Path:
        """The job script's error output, every attempt appended."""
        return self.dir / "logs" / f"{run_id}.log"

    @property
    def summary(self) -> Path:
        return self.dir / "summary.csv"


def new_run_doc(spec: dict) -> dict:
    return {"run_id": spec["run_id"], "campaign": spec["campaign"], "library": spec["library"],
            "procs": spec["procs"], "nodes": spec["nodes"], "launch": spec.get("launch", 0),
            "launches_of": spec.get("launches", 1),
            "thread_level": spec.get("thread_level", "single"), "status": "running",
            "started": now(), "settings": spec.get("settings"), "provenance": {}, "cells": []}


def mark_unfinished(spec: dict, status: str, error: str) -> dict:
    """Close a run that did not complete: every cell of ``spec`` without a result is recorded
    with ``status`` (``failed`` or ``timeout``), the cells it finished are kept, and the run
    document is written to ``runs/``. Returns the run document."""
    progress, final = Path(spec["outputs"]["progress"]), Path(spec["outputs"]["run"])
    doc = read_json(progress) if progress.is_file() else new_run_doc(spec)
    done = {c["cell_id"] for c in doc["cells"]}
    for cell in spec["cells"]:
        if cell["cell_id"] not in done:
            doc["cells"].append({"cell_id": cell["cell_id"], "cell": cell, "status": status,
                                 "error": error, "stats": {}, "converged": False,
                                 "finished": now()})
    doc["status"] = status
    doc["finished"] = now()
    write_json(final, doc)
    return doc


def not_applicable_doc(run_id: str, campaign: str, run, reasons: dict, settings: dict | None = None,
                       config_hash: str | None = None) -> dict:
    """The run document of cells the plan found outside their native algorithm's condition
    (``harness.campaign.plan.NotApplicable``: ``run`` holds them, ``reasons`` says why by cell
    id): never launched, every cell ``not-applicable`` with its reason as ``error``."""
    when = now()
    doc = new_run_doc({"run_id": run_id, "campaign": campaign, "library": run.library,
                       "procs": run.procs, "nodes": run.nodes, "thread_level": run.thread_level,
                       "settings": settings})
    doc.update(status="not-applicable", started=when, finished=when,
               provenance={"launched": False, "config_hash": config_hash})
    doc["cells"] = [{"cell_id": c.cell_id, "cell": c.to_dict(), "status": "not-applicable",
                     "error": reasons[c.cell_id], "stats": {}, "converged": False,
                     "finished": when} for c in run.cells]
    return doc


def write_not_applicable(store: CampaignStore, doc: dict) -> bool:
    """Write ``doc`` (``not_applicable_doc``) to ``runs/``, unless the document there says the
    same but for its time stamps (kept, so a summary rebuilt from it does not change). True
    when written."""
    def same(d):
        return {**d, "started": None, "finished": None,
                "cells": [{**c, "finished": None} for c in d.get("cells") or []]}

    path = store.run_doc(doc["run_id"])
    try:
        if same(read_json(path)) == same(doc):
            return False
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    write_json(path, doc)
    return True


def oversubscribed(prov: dict) -> bool | None:
    """True when some node ran more ranks than it has cores (timings are then not to be
    compared); None when the provenance does not say (a run that never started)."""
    nodes, cores = prov.get("nodes") or prov.get("hosts"), prov.get("cores")
    if not nodes or not cores or len(nodes) != len(cores):
        return None
    ranks: dict = {}
    for node, n in zip(nodes, cores):
        ranks.setdefault(node, [0, n])[0] += 1
    return any(r > (c or 0) for r, c in ranks.values())


def t_rejected(normality_p, n, lag1) -> str | None:
    """Which assumptions of the Student-t interval the cell's repetitions reject at 5 %:
    ``normality`` (Shapiro-Wilk), ``independence`` (lag-1 autocorrelation, Bartlett's bound),
    both, or ``none``; None when the statistics are missing (an older run document, an
    unfinished cell)."""
    if n is None or lag1 is None:
        return None
    said = []
    if normality_p is not None and normality_p == normality_p and normality_p < 0.05:
        said.append("normality")
    if autocorrelated(int(n), float(lag1)):
        said.append("independence")
    return ", ".join(said) or "none"


def summary_rows(doc: dict, settings: dict | None = None,
                 normality: dict | None = None) -> list[dict]:
    """One summary row per cell of a run document; ``normality`` (cell id -> Shapiro-Wilk p,
    ``normality_from_raw``) replaces the run document's ``normality_p``, which the bench
    leaves empty."""
    normality = normality or {}
    prov = doc.get("provenance") or {}
    over = oversubscribed(prov)
    # a cell the run never reached has no metric of its own: the run's setting names it
    run_metric = (doc.get("settings") or settings or {}).get("metric", "mean")
    rows = []
    for entry in doc["cells"]:
        cell, st = entry["cell"], entry.get("stats") or {}
        mean = st.get("mean")
        procs = cell["procs"]
        algbw = cell["size"] / mean if mean else None
        rows.append({
            "campaign": doc.get("campaign"),
            "cell_id": entry["cell_id"],
            "run_id": doc["run_id"],
            **{k: cell.get(k) for k in ("library", "algorithm", "procs", "nodes", "size", "count",
                                        "dtype", "op", "delay", "max_delay", "late_rank")},
            "params": json.dumps(dict(cell.get("params") or [])),
            "thread_level": prov.get("thread_level") or cell.get("thread_level", "single"),
            "timing": cell.get("timing", "percall"),
            "buffers": cell.get("buffers", "reuse"),
            "launch": doc.get("launch", 0),
            "launches_of": doc.get("launches_of", 1),
            "oversubscribed": over,
            # where the ranks ran (harness/measure/placement.py): two on one CPU, and the
            # most times the kernel took a rank's CPU during the cell
            "shared_cpu": (entry.get("placement") or {}).get("shared_cpu"),
            "involuntary_switches": max((entry.get("placement") or {}).get(
                "involuntary_switches") or [None], key=lambda v: -1 if v is None else v),
            # what the algorithm chose or counted (SUARA2's grid, message counts, ...)
            "record": json.dumps(entry["record"], sort_keys=True) if entry.get("record") else None,
            "library_version": prov.get("library_version"),
            "metric": entry.get("metric") or run_metric,
            **{k: st.get(k) for k in ("n", "mean", "ci_low", "ci_high", "rel_halfwidth", "std",
                                      "median", "median_ci_low", "median_ci_high", "min", "max",
                                      "p5", "p95", "outliers", "lag1", "effective_n",
                                      "ci_method")},
            "normality_p": normality.get(entry["cell_id"], st.get("normality_p")),
            "t_rejected": t_rejected(normality.get(entry["cell_id"], st.get("normality_p")),
                                     st.get("n"), st.get("lag1")),
            "converged": entry.get("converged"),
            "status": entry["status"],
            "error": entry.get("error"),
            "algbw": algbw,
            "busbw": bus_bandwidth(cell["algorithm"], algbw, procs),
            "warmup": entry.get("warmup"),
            "seed": entry.get("seed"),
            "host": ",".join(sorted(set(prov.get("nodes") or prov.get("hosts") or []))) or None,
            "git_commit": prov.get("git_commit"),
            "config_hash": prov.get("config_hash"),
            "finished": entry.get("finished"),
            **_simulated(entry, prov),
        })
    return rows


def _simulated(entry: dict, prov: dict) -> dict:
    """A row's simulation columns: a cell with a platform id is simulated (``Cell.platform``);
    the simulator and what it copies from its record, else its run's provenance (a simulated
    cell that failed, or was never simulated, records nothing of its own)."""
    record, platform = entry.get("record") or {}, (entry.get("cell") or {}).get("platform")
    if not platform:
        return {"simulated": False, "platform": None, "simulator": None, "copies": None}
    return {"simulated": True, "platform": platform,
            "simulator": record.get("simulator") or prov.get("simulator"),
            "copies": record.get("copies")}


def _spec_of(store: CampaignStore, run_id: str) -> dict | None:
    try:
        return read_json(store.job_spec(run_id))
    except (OSError, ValueError):
        return None


def _complete_journal(store: CampaignStore, run_id: str) -> dict | None:
    try:
        journal = read_json(store.progress(run_id))
    except (OSError, ValueError):
        return None
    ok = isinstance(journal, dict) and isinstance(journal.get("cells"), list)
    return journal if ok and journal.get("status") == "complete" else None


def load_run_doc(store: CampaignStore, run_id: str, log=None) -> dict:
    """``runs/<run_id>.json``; when it does not parse, it is rebuilt from the run's journal
    (``progress/<run_id>.json``, cells it lacks recorded ``failed``) and rewritten, with one
    line to ``log``. Without a usable journal: ``StoreError`` naming the file and the remedy."""
    path = store.run_doc(run_id)
    try:
        doc = read_json(path)
        if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
            raise ValueError("not a run document (no list of cells)")
        return doc
    except FileNotFoundError:
        # gone since it was listed: a second workflow on this campaign is running the run's job
        # again (Snakemake removes a job's outputs first) and will rewrite it from the same
        # complete journal, which is read here and left for that workflow to write
        journal = _complete_journal(store, run_id)
        if journal is None:
            raise StoreError(f"{path}: missing, and its run has no complete journal: run "
                             f"`harness retry {store.campaign}` to measure it") from None
        return journal
    except ValueError as exc:
        problem = f"{path}: unreadable ({type(exc).__name__}: {str(exc)[:80]})"
    spec = _spec_of(store, run_id)
    try:
        journal = read_json(store.progress(run_id))
        usable = isinstance(journal, dict) and isinstance(journal.get("cells"), list)
    except (OSError, ValueError):
        usable = False
    if not usable or spec is None:
        raise StoreError(f"{problem}; no journal to rebuild it from: move it away and run "
                         f"`harness retry {store.campaign}` to measure its run again")
    if journal.get("status") == "complete":
        write_json(path, journal)
        if log:
            log(f"{problem}; rebuilt from {store.progress(run_id)} (the run was complete)")
        return journal
    doc = mark_unfinished({**spec, "outputs": {**spec["outputs"],
                                               "progress": str(store.progress(run_id)),
                                               "run": str(path)}},
                          "failed", "the run document was damaged; rebuilt from the journal, "
                          "this cell was not in it")
    done = len([c for c in doc["cells"] if c["status"] != "failed"])
    if log:
        log(f"{problem}; rebuilt from {store.progress(run_id)} ({done} measured cells kept)")
    return doc


TIMED = ("ok", "not-converged")  # the statuses whose repetitions are times (every reader's)


def normality_from_raw(store: CampaignStore, doc: dict) -> dict[str, float]:
    """cell id -> the Shapiro-Wilk p-value of the cell's metric over its raw repetitions
    (``raw/<run>.parquet``), for each measured cell of the run; {} when the raw file is
    missing or unreadable (``harness check`` names it). Computed here, once per summary,
    rather than in the launch: scipy.stats took rank 0 a second of every launch."""
    run_metric = (doc.get("settings") or {}).get("metric", "mean")
    wanted = {e["cell_id"]: f"{e.get('metric') or run_metric}_elapsed" for e in doc["cells"]
              if e.get("status") in TIMED and int((e.get("stats") or {}).get("n") or 0) >= 3}
    path = store.raw(doc["run_id"])
    if not wanted or not path.is_file():
        return {}
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path).to_pandas()
    except Exception:  # noqa: BLE001  (pyarrow raises several types for damaged files)
        return {}
    out = {}
    for cell_id, rows in table.groupby("cell_id"):
        column = wanted.get(cell_id)
        if column in rows:
            out[cell_id] = normality_p(rows[column].to_numpy(float))
    return out


def load_run_docs(store: CampaignStore, runs=None, log=None) -> dict[str, dict]:
    """Run id -> run document (``load_run_doc``) of ``runs`` (default: every document in
    ``runs/``): one snapshot that a summary and its check both read, so a second workflow
    rewriting a run's document between them (Snakemake removes a job's output first) cannot
    make them disagree. A run without a document or a complete journal is left out."""
    ids = sorted(runs) if runs is not None else sorted(
        p.stem for p in (store.dir / "runs").glob("*.json"))
    return {run_id: load_run_doc(store, run_id, log=log) for run_id in ids
            if store.run_doc(run_id).is_file() or _complete_journal(store, run_id) is not None}


def summary_frame(store: CampaignStore, keep=None, runs=None, log=None, docs=None):
    """The summary table from every run document (see ``rebuild_summary``), not written;
    ``docs``: the snapshot to read (``load_run_docs``; default: read now)."""
    import pandas as pd

    rows, settings = [], {}
    docs = load_run_docs(store, runs, log) if docs is None else docs
    for run_id in sorted(docs):
        if runs is not None and run_id not in runs:
            continue
        doc = docs[run_id]
        settings = doc.get("settings") or settings
        rows.extend(summary_rows(doc, normality=normality_from_raw(store, doc)))
    df = pd.DataFrame(rows, columns=[c for c in SUMMARY_COLUMNS if c not in LAUNCH_COLUMNS]
                      + ["launches_of"])
    if keep is not None:
        df = df[df.cell_id.isin(keep)]
    if not df.empty:
        df = df.sort_values("finished").drop_duplicates(["cell_id", "launch"], keep="last")
        # a cell's newest batch of launches decides how many belong to it (a rerun with fewer
        # launches drops the older batch's extra ones)
        newest = df.groupby("cell_id")["launches_of"].transform("last")
        df = df[(df.launches_of == newest) & (df.launch < newest)]
    df = combine_frame(df, float(settings.get("confidence", 0.95)),
                       float(settings.get("precision", 0.025)))
    df = attach_auto_ran(df, store)  # what AUTO ran (results/auto_ran.py)
    df = df.reindex(columns=SUMMARY_COLUMNS)
    if not df.empty:
        df = df.sort_values(["library", "algorithm", "procs", "size", "dtype", "op", "delay",
                             "max_delay"], kind="stable")
    return df


def rebuild_summary(store: CampaignStore, keep=None, runs=None, log=None, docs=None):
    """Rewrite ``summary.csv`` from every run document; the newest result of a (cell, launch)
    wins, and a cell measured in several launches gets one row over them
    (``harness.results.launches``). ``keep``: only these cell ids and ``runs``: only these run ids
    (the workflow's plan), so results of an older config drop out. A damaged run document is
    rebuilt from its journal (``load_run_doc``). ``docs``: the snapshot (``load_run_docs``)."""
    df = summary_frame(store, keep=keep, runs=runs, log=log, docs=docs)
    atomic_write_text(store.summary, df.to_csv(index=False))
    return df


def row_json(text) -> dict:
    """A summary row's ``params`` or ``record`` column as a dict: the JSON object it holds;
    {} when it is empty, missing (NaN) or not a JSON object."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
