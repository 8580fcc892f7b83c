"""The typed summary: ``summary.csv`` as every reader sees it, made once.

``load(source)`` takes the file (or a frame already read) and gives one frame in which

- every column of ``store.SUMMARY_COLUMNS`` exists;
- the conditions a cell always has take their defaults where the file has none (``DEFAULTS``,
  those of ``harness.cells.Cell``); a cell that failed before its first repetition, and so
  records no condition, takes the one the other cells share;
- numbers are numbers, flags are real booleans (``FLAGS``: a missing flag is False), text is
  text, ``status`` is a categorical of ``store.STATUSES``;
- ``kind`` says what each cell is (``harness.cells.kind_of``: native, selector, harness,
  workload, probe), read from the cell's algorithm and parameters here and nowhere else;
- a cell that failed before its first repetition records no library version: it takes its
  library's when the library was measured in exactly one.

What the rows mean (timed, comparable, BEST, oversubscribed) is decided over this frame in
``harness.analysis.vocabulary`` and ``harness.analysis.best``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..cells import kind_of
from .store import STATUSES, SUMMARY_COLUMNS, row_json

# the conditions of a cell and their defaults (harness.cells.Cell; late_rank 0: no late rank)
DEFAULTS = {"nodes": 1, "dtype": "float64", "op": "sum", "delay": "none", "max_delay": 0.0,
            "late_rank": 0, "metric": "mean", "buffers": "reuse", "timing": "percall",
            "thread_level": "single"}
# conditions a never-measured cell takes from the cells that were (the table's context)
SHARED = ("nodes", "dtype", "op", "delay", "max_delay", "late_rank", "metric", "buffers")
FLAGS = ("oversubscribed", "shared_cpu", "converged", "launches_disagree", "simulated")
NUMBERS = ("procs", "nodes", "size", "count", "max_delay", "late_rank", "n", "mean", "ci_low",
           "ci_high", "rel_halfwidth", "std", "median", "median_ci_low", "median_ci_high", "min",
           "max", "normality_p", "p5", "p95", "outliers", "lag1", "effective_n", "algbw",
           "busbw", "warmup", "launches", "within_mean", "within_ci_low", "within_ci_high",
           "within_rel_halfwidth", "within_n", "involuntary_switches", "launch")
TEXTS = ("campaign", "cell_id", "run_id", "library", "library_version", "algorithm", "dtype",
         "op", "delay", "metric", "buffers", "timing", "thread_level", "params", "error",
         "finished", "auto_ran", "host", "git_commit", "config_hash", "ci_method", "t_rejected",
         "record", "launch_means", "odd_launches", "platform", "simulator", "copies")


def load(source) -> pd.DataFrame:
    """The typed summary of ``source``: a path to ``summary.csv`` or a frame (copied)."""
    raw = source.copy() if isinstance(source, pd.DataFrame) else pd.read_csv(Path(source))
    d = raw.reindex(columns=[*SUMMARY_COLUMNS,
                             *[c for c in raw.columns if c not in SUMMARY_COLUMNS]])
    for col in NUMBERS:
        d[col] = pd.to_numeric(d[col], errors="coerce")
    _fill_conditions(d)
    for col in FLAGS:
        d[col] = d[col].map(_flag).astype(bool)
    for col in TEXTS:
        d[col] = d[col].astype("object").where(d[col].notna(), "").astype(str)
    d["params"] = d["params"].replace("", "{}")
    d["status"] = pd.Categorical(d["status"], categories=STATUSES)
    _fill_versions(d)
    d["kind"] = [kind_of(a, row_json(p)) for a, p in zip(d["algorithm"], d["params"])]
    return d


def typed(d: pd.DataFrame) -> pd.DataFrame:
    """``d`` when it is a typed summary already (it has ``kind``), else ``load(d)``: the entry
    points of the analysis accept a frame read any way; one loaded by ``load`` is not redone."""
    return d if "kind" in d.columns else load(d)


def allreduce_rows(d: pd.DataFrame, workloads: bool = False) -> pd.DataFrame:
    """The rows that time one allreduce call: without the probes (ping-pong, local reduction)
    and, unless ``workloads``, without the workload rows (a training iteration). ``d``: a typed
    summary, or any frame with ``algorithm`` and ``params`` (``typed``)."""
    if not len(d) or "algorithm" not in d.columns:
        return d
    kinds = typed(d)["kind"]
    left_out = {"probe"} if workloads else {"probe", "workload"}
    return d[~kinds.isin(left_out)]


def _fill_conditions(d: pd.DataFrame) -> None:
    for col, default in DEFAULTS.items():
        known = d[col].dropna()
        if col in SHARED and len(known):
            d[col] = d[col].fillna(known.mode().iloc[0])
        else:
            d[col] = d[col].fillna(default)


def _flag(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return str(value).strip().lower() in ("true", "1")


def _fill_versions(d: pd.DataFrame) -> None:
    for lib, versions in d.groupby("library")["library_version"]:
        known = set(versions) - {""}
        if len(known) == 1:
            d.loc[(d["library"] == lib) & (d["library_version"] == ""), "library_version"] = (
                known.pop())
