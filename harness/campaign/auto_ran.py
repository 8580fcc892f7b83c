"""AUTO's selection map: for every AUTO cell of a campaign, what the library ran.

The AUTO allreduce cells are grouped by installation, P, node count, dtype and op; each group
is one ``harness whatran`` launch over its sizes (``harness.measure.whatran``: rank 0 under
gdb, one call per size). The result, ``results/<c>/auto_ran/<group>.json``, fills the summary's
``auto_ran`` column (``harness.results.auto_ran``), the AUTO-vs-BEST table's "AUTO ran" and
the ``auto_choices`` table and figure. A launch that fails is recorded, per size, as
``failed`` with its error: the stage never stops the campaign's summary.

``python -m harness.campaign.auto_ran SPEC OUT`` runs one group (the workflow's
``auto_ran`` rule, a Slurm job of the group's ranks on a cluster).
"""

from __future__ import annotations

import sys

from .. import fileio
from ..analysis.vocabulary import AUTO
from ..measure import preflight
from ..measure.whatran import whatran
from . import plan


def groups(runs) -> dict[str, dict]:
    """``{group id: {library, procs, nodes, dtype, op, sizes}}`` of the AUTO allreduce cells
    (no workload, no ping-pong) of ``runs``."""
    found: dict[tuple, set] = {}
    for r in runs:
        for c in r.cells:
            if c.algorithm != AUTO or c.kind != "native":
                continue
            found.setdefault((r.library, c.procs, r.nodes, c.dtype, c.op), set()).add(c.size)
    return {f"{lib}-p{procs}-n{nodes}-{dtype}-{op}":
            {"library": lib, "procs": procs, "nodes": nodes, "dtype": dtype, "op": op,
             "sizes": sorted(sizes)}
            for (lib, procs, nodes, dtype, op), sizes in sorted(found.items())}


def spec(cfg, group: dict) -> dict:
    """What one group's job needs: the group and its installation's declaration."""
    return {**group, "site": cfg.libraries.get(group["library"]), "launch": cfg.launch}


def execute(spec_path: str, out_path: str) -> int:
    s = fileio.read_json(spec_path)
    doc = {k: s[k] for k in ("library", "procs", "nodes", "dtype", "op")}
    try:
        lib = plan.installation(s["library"], s.get("site"), s.get("launch", "local"))
        found = whatran(lib, preflight.environment(lib), s["procs"], s["sizes"], s["dtype"],
                        "native:auto", s["op"], s["nodes"])
        doc.update(version=lib.version, sizes=found)
    except Exception as exc:  # recorded per size: the summary goes on without it
        why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        doc["sizes"] = [{"size": z, "functions": [], "ran": [], "status": "failed", "why": why}
                        for z in s["sizes"]]
    fileio.write_json(out_path, doc)
    said = {r["size"]: (r["ran"][0] if r["ran"] else r["status"]) for r in doc["sizes"]}
    print(f"AUTO of {s['library']} at P={s['procs']}: "
          + ", ".join(f"{k} B {v}" for k, v in said.items()), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m harness.campaign.auto_ran SPEC.json OUT.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(execute(sys.argv[1], sys.argv[2]))
