"""A run's journal (``progress/<run>.json``) and raw table (``raw/<run>.parquet``) as a new
attempt of the run finds them: what an earlier attempt finished is kept (``resume``), and the
raw table is written whole after every cell (``write_raw``). Used by the measurement loop
(``harness.measure.bench``) and the simulation (``harness.simulate.bench``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import fileio


def write_raw(path: Path, tables: list) -> None:
    import pyarrow as pa

    fileio.write_parquet(path, pa.concat_tables(tables, promote_options="default"))


def resume(spec: dict, rank: int):
    """The run document and raw rows of an earlier attempt of this run with the same settings,
    from its journal (``progress/<run>.json``): cells that failed or timed out are retried."""
    progress, raw_path = Path(spec["outputs"]["progress"]), Path(spec["outputs"]["raw"])
    if rank != 0 or not progress.is_file():
        return None, []
    try:
        doc = fileio.read_json(progress)
    except ValueError as exc:
        print(f"{progress}: unreadable ({type(exc).__name__}); the run is "
              f"measured from its start", file=sys.stderr, flush=True)
        return None, []
    if not isinstance(doc, dict) or doc.get("run_id") != spec["run_id"] or doc.get("settings") != spec["settings"]:
        return None, []
    doc["cells"] = [c for c in doc["cells"] if c["status"] not in ("failed", "timeout")]
    done = [c["cell_id"] for c in doc["cells"]]
    raw = []
    if raw_path.is_file() and done:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(raw_path)
        except (OSError, ValueError, pa.ArrowException) as exc:
            # the repetitions of the finished cells are lost: they are measured again
            print(f"{raw_path}: unreadable ({type(exc).__name__}); its "
                  f"{len(done)} measured cell(s) are measured again", file=sys.stderr, flush=True)
            doc["cells"] = []
            return doc, []
        raw = [table.filter(pc.is_in(table["cell_id"], value_set=pa.array(done)))]
    return doc, raw
