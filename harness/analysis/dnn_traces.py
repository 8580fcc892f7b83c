"""The gradient traces of Castelló et al.'s CNNs as data: per model its tensors and
parameters against the published count, and the allreduce calls one training iteration makes
under each fusion policy and precision (``model_table``). Written and drawn by
``harness/report/dnn_traces.py``.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from ..dnn import fusion, traces

COMBOS = tuple((p, q) for p in fusion.POLICIES for q in fusion.PRECISIONS)


def model_table(models=traces.MODELS) -> pd.DataFrame:
    """The numeric table, one row per model (also the CSV)."""
    rows = []
    for m in models:
        t = traces.load(m)
        info = traces.INFO[m]
        row = {
            "model": m, "dataset": t.dataset, "tensors": len(t.tensors),
            "parameters": t.parameters, "published_parameters": t.published_parameters,
            "published_rounding": info.published_rounding,
            "published_source": t.published_source,
            "matches": traces.matches_published(t),
        }
        for policy, precision in COMBOS:
            c = fusion.calls(t.numels, policy, precision)
            row[f"{policy}_{precision}_calls"] = len(c)
            row[f"{policy}_{precision}_largest_bytes"] = max(c)
        row["bytes_per_iteration_fp32"] = t.parameters * fusion.PRECISIONS["fp32"]
        rows.append(row)
    return pd.DataFrame(rows)


def messages(model: str, precision: str = "fp32") -> dict:
    """One training iteration's gradient messages of ``model`` at ``precision`` (Fig. 7): the
    message sizes in bytes (``sizes``, ascending), how many tensors have each (``counts``),
    each fusion policy's calls in bytes (``calls``), the tensors and the bytes of all
    parameters (``tensors``, ``bytes``)."""
    t, itemsize = traces.load(model), fusion.PRECISIONS[precision]
    counts = Counter(n * itemsize for n in t.numels)
    sizes = sorted(counts)
    return {"sizes": sizes, "counts": [counts[s] for s in sizes], "tensors": len(t.tensors),
            "calls": {p: fusion.calls(t.numels, p, precision) for p in fusion.POLICIES},
            "bytes": t.parameters * itemsize}
