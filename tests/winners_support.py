"""Helpers for workflow tests whose outcome must not depend on which algorithm happened to
be fastest: a campaign is run up to its summary, the summary is rewritten so that a chosen
algorithm clearly wins each point, and the workflow then continues from that summary."""

import json
from pathlib import Path

import pandas as pd

from harness.campaign.confirm import gain_interval, verdict

SLOW, FAST = 1e-3, 1e-5  # seconds: a 100x gap, with intervals of +-1 %


def set_winners(res: Path, winners: dict) -> pd.DataFrame:
    """Rewrite ``res/summary.csv``: at each ``(library, size) -> algorithm`` of ``winners``,
    every native cell is measured (status ok, not oversubscribed), the named algorithm at
    ``FAST`` and every other at ``SLOW`` (``native:auto`` as winner: AUTO is BEST). Points
    not named keep their measured rows. Returns the rewritten summary."""
    path = res / "summary.csv"
    df = pd.read_csv(path)
    for (library, size), winner in winners.items():
        rows = (df.library == library) & (df["size"] == size) & \
            df.algorithm.str.startswith("native:")
        if winner not in set(df.loc[rows, "algorithm"]):
            raise AssertionError(f"{winner} is not measured for {library} at {size} B: "
                                 f"{sorted(df.loc[rows, 'algorithm'])}")
        mean = df.loc[rows, "algorithm"].map(lambda a, w=winner: FAST if a == w else SLOW)
        df.loc[rows, "mean"] = mean
        df.loc[rows, "ci_low"] = mean * 0.99
        df.loc[rows, "ci_high"] = mean * 1.01
        df.loc[rows, "status"] = "ok"
        df.loc[rows, "oversubscribed"] = False
        if "error" in df:
            df["error"] = df["error"].astype(object)
            df.loc[rows, "error"] = ""
    df.to_csv(path, index=False)
    return df


def run_docs(runs_dir: Path) -> list[dict]:
    """The run documents under ``runs_dir`` in launch order."""
    docs = [json.loads(p.read_text()) for p in runs_dir.glob("*.json")]
    return sorted(docs, key=lambda d: d["launch"])


def algorithm_of(doc: dict) -> str:
    algs = {c["cell"]["algorithm"] for c in doc["cells"]}
    if len(algs) != 1:
        raise AssertionError(f"launch {doc['launch']} measures {sorted(algs)}, not one algorithm")
    return algs.pop()


def means_by_cell(docs: list[dict]) -> dict:
    """cell id -> its mean in each launch that measured it, in launch order (NaN when the
    cell has no usable mean), as the confirmation stage collects them."""
    out: dict[str, list] = {}
    for d in docs:
        for c in d["cells"]:
            st = c.get("stats") or {}
            ok = c["status"] in ("ok", "not-converged") and st.get("mean")
            out.setdefault(c["cell_id"], []).append(float(st["mean"]) if ok else float("nan"))
    return out


def expected_verdict(a: list[float], b: list[float], confidence: float = 0.95):
    """(gain, low, high, verdict) of paired launch means, as the confirmation defines them."""
    g, lo, hi = gain_interval(a, b, confidence)
    return g, lo, hi, verdict(lo, hi)
