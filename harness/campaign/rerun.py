"""``harness run --campaign <c> --cell <id>``: measure one cell of a campaign again, with the
campaign's own settings (stopping rule, warm-up, timing, thread level, library, launcher,
seed, plugins), and put the result in place of the old one.

The cell is measured in a run of its own under ``results/<c>/rerun/`` (job script, spec,
provenance kept there). Its entry and raw repetitions then replace the cell's in the planned
run's document, journal and raw file (each rewritten atomically; the entry names the rerun in
``rerun_of``). The run documents are then newer than ``summary.csv``, so the next
``snakemake`` rebuilds only the aggregate and the report.
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from .. import fileio
from ..errors import UnknownCell
from ..results import store as results
from . import plan, runner


def find(runs, cell_id: str):
    """The planned runs (one per launch) that hold ``cell_id``, with the cell; UnknownCell
    names the closest ids."""
    hits = [(r, c) for r in runs for c in r.cells if c.cell_id == cell_id]
    if not hits:
        ids = sorted({c.cell_id for r in runs for c in r.cells})
        close = difflib.get_close_matches(cell_id, ids, n=3, cutoff=0.3) or ids[:3]
        raise UnknownCell(f"no cell {cell_id!r} in the campaign; closest: {', '.join(close)}")
    return hits


def _replace(store: results.CampaignStore, run_id: str, entry: dict, raw) -> None:
    """Put ``entry`` (and its raw rows) in place of the cell's in run ``run_id``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    cid = entry["cell_id"]
    for path in (store.run_doc(run_id), store.progress(run_id)):
        if not path.is_file():
            continue
        doc = (results.load_run_doc(store, run_id) if path == store.run_doc(run_id)
               else fileio.read_json(path))
        cells = [c for c in doc["cells"] if c["cell_id"] != cid]
        doc["cells"] = cells + [entry]
        fileio.write_json(path, doc)
    path = store.raw(run_id)
    parts = []
    if path.is_file():
        table = pq.read_table(path)
        parts.append(table.filter(pc.invert(pc.equal(table["cell_id"], cid))))
    if raw is not None and raw.num_rows:
        parts.append(raw)
    if parts:
        fileio.write_parquet(path, pa.concat_tables(parts, promote_options="default"))


def rerun(campaign, cell_id: str, timeout=None, log=print) -> list[str]:
    """Measure ``cell_id`` of ``campaign`` (a ``harness.campaign.workflow.Campaign``) again in every
    launch that holds it; returns the planned run ids updated."""
    import pyarrow.parquet as pq

    cfg, store = campaign.cfg, campaign.store
    scratch = results.CampaignStore(store.dir, "rerun")
    done = []
    for planned, cell in find(campaign.runs.values(), cell_id):
        if not store.run_doc(planned.run_id).is_file():
            raise UnknownCell(f"cell {cell_id!r}: its run {planned.run_id} has not run yet "
                              f"(run the campaign first)")
        lib = plan.library_for(cfg, planned.library)
        one = replace(planned, cells=(cell,))
        script, spec = runner.prepare(one, lib, scratch, campaign.settings(), seed=cfg.seed,
                                      plugins=cfg.plugins, config_hash=cfg.digest,
                                      launches=int(cfg.stopping.get("launches", 1)),
                                      platform=campaign.platform(planned))
        runner.write(scratch, script, spec)
        runner.fresh(spec)
        log(f"run {spec['run_id']}: cell {cell_id} of run {planned.run_id}"
            + (f" (launch {planned.launch + 1})" if planned.launch else ""))
        outcome = runner.execute(scratch, spec, timeout=timeout)
        doc = fileio.read_json(scratch.run_doc(one.run_id))
        entry = next(c for c in doc["cells"] if c["cell_id"] == cell_id)
        entry = {**entry, "rerun_of": one.run_id}
        raw_path = scratch.raw(one.run_id)
        raw = pq.read_table(raw_path) if raw_path.is_file() and outcome == "complete" else None
        if raw is not None:
            import pyarrow.compute as pc

            raw = raw.filter(pc.equal(raw["cell_id"], cell_id))
        _replace(store, planned.run_id, entry, raw)
        done.append(planned.run_id)
    return done
