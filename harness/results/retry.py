"""``harness retry <campaign>``: measure again exactly the cells that did not finish.

A run whose document lists ``failed`` or ``timeout`` cells, or whose document or raw file is
damaged beyond recovery, is reset: its run document moves to ``retried/`` (kept, with a time
stamp), and so does the summary, so the workflow (any way it is started) runs it again. The run's journal (``progress/``) stays: the bench
resumes from it and measures only the cells it lacks, so an ``ok``, ``not-converged`` or
``wrong`` cell is never measured twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import store as results

RETRIED = ("failed", "timeout")


@dataclass
class Reset:
    run_id: str
    cells: dict = field(default_factory=dict)  # status -> count
    reason: str = ""


def _raw_readable(path: Path) -> bool:
    if not path.is_file():
        return True
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
        return True
    except Exception:  # pyarrow raises several types for damaged files
        return False


def plan(store: results.CampaignStore, runs=None) -> list[Reset]:
    """The runs to reset and why (``runs``: only these run ids, e.g. the campaign's plan)."""
    out = []
    for path in sorted((store.dir / "runs").glob("*.json")):
        run_id = path.stem
        if runs is not None and run_id not in runs:
            continue
        try:
            doc = results.load_run_doc(store, run_id)
        except results.StoreError as exc:
            out.append(Reset(run_id, reason=str(exc)))
            continue
        counts: dict = {}
        for c in doc["cells"]:
            if c["status"] in RETRIED:
                counts[c["status"]] = counts.get(c["status"], 0) + 1
        if not _raw_readable(store.raw(run_id)):
            out.append(Reset(run_id, counts, f"{store.raw(run_id)}: unreadable"))
        elif counts:
            out.append(Reset(run_id, counts))
    return out


def reset(store: results.CampaignStore, todo: list[Reset]) -> list[Path]:
    """Move the run documents of ``todo`` to ``retried/<run>-<time>.json``, and the summary
    beside them (Snakemake does not remake a missing run document while the summary built
    from it is there; the summary is rebuilt from the run documents). Returns where."""
    stamp = results.now().replace(":", "").replace("+00:00", "Z")
    moved = []
    sources = [(store.run_doc(r.run_id), f"{r.run_id}-{stamp}.json") for r in todo]
    if todo and store.summary.is_file():
        sources.append((store.summary, f"summary-{stamp}.csv"))
    for src, name in sources:
        dst = store.dir / "retried" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
        moved.append(dst)
    return moved


def describe(todo: list[Reset]) -> str:
    if not todo:
        return "nothing to retry: no failed or timeout cell"
    total: dict = {}
    for r in todo:
        for k, v in r.cells.items():
            total[k] = total.get(k, 0) + v
    cells = ", ".join(f"{v} {k}" for k, v in sorted(total.items())) or "no cell counted"
    lines = [f"retrying {len(todo)} run(s) ({cells} cell(s)):"]
    for r in todo:
        what = ", ".join(f"{v} {k}" for k, v in sorted(r.cells.items()))
        lines.append(f"  {r.run_id}  {what}" + (f"  ({r.reason})" if r.reason else ""))
    return "\n".join(lines)
