"""The summary's ``auto_ran`` column: what AUTO ran in each AUTO cell, from the campaign's
``auto_ran/<group>.json`` documents (``harness.campaign.auto_ran``). The catalogue's name of
what ran (``ring``, ``reduce_bcast``, ...); else ``<name> (not forcible)`` where one
allreduce function ran that the catalogue cannot force (Intel MPI's rec_multiplying at P=4,
2-4 KiB), ``unidentified: <functions>``, ``unverifiable: <why>`` or ``failed: <why>``; empty
where the stage did not run."""

from __future__ import annotations

import json
import re

from ..cells import AUTO



def labels(store) -> dict[tuple, str]:
    """``(library, procs, nodes, dtype, op, size) -> label`` from the store's documents."""
    out = {}
    for path in sorted((store.dir / "auto_ran").glob("*.json")):
        if path.name.endswith(".spec.json"):
            continue
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        key = (doc["library"], int(doc["procs"]), int(doc["nodes"]), doc["dtype"], doc["op"])
        for r in doc.get("sizes", []):
            out[(*key, int(r["size"]))] = label(r)
    return out


ALLREDUCE_FUNCTION = re.compile(r"(?:MPIR_Allreduce_intra|ompi_coll_base_allreduce_intra)_(\w+)")


def label(r: dict) -> str:
    if r.get("ran"):
        return r["ran"][0]
    if r.get("status") == "unidentified":
        names = [n for n, _ in r.get("functions", [])]
        algs = [m.group(1) for n in names if (m := ALLREDUCE_FUNCTION.fullmatch(n))
                and m.group(1) != "auto"]
        if len(algs) == 1:  # one allreduce algorithm of the library's, not in the catalogue
            return f"{algs[0]} (not forcible)"
        return "unidentified: " + " + ".join(names)
    return f"{r.get('status', 'unknown')}: {r.get('why', '')}".strip(": ")


def attach(df, store):
    """``df`` (a summary frame) with ``auto_ran`` filled on its AUTO rows."""
    found = labels(store)
    df["auto_ran"] = ""
    if not found or df.empty:
        return df
    auto = df["algorithm"] == AUTO
    keys = zip(df.loc[auto, "library"], df.loc[auto, "procs"].astype(int),
               df.loc[auto, "nodes"].fillna(1).astype(int), df.loc[auto, "dtype"],
               df.loc[auto, "op"], df.loc[auto, "size"].astype(int))
    df.loc[auto, "auto_ran"] = [found.get(k, "") for k in keys]
    return df
