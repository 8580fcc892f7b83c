"""The Hockney models fitted to a campaign's summary (Nuriyev et al., Sect. 5): the summary's
allreduce rows of Open MPI's six forcible algorithms (or the harness's own) that carry a time,
undelayed, regressed over P and message size (``harness.models.fit_all``)."""

from __future__ import annotations

import hashlib

import pandas as pd

from .. import models
from ..libraries import split_name
from ..results.summary import allreduce_rows, load
from .vocabulary import timed_mask


def fit_campaign(summary_csv, library: str = "openmpi", source: str = "native",
                 gamma: float | None = None, campaign: str | None = None) -> models.Params:
    """(alpha, beta) of each Table 1 algorithm fitted to a campaign's ``summary.csv`` (Sect.
    5: linear regression over cells with P and m varied) and gamma from a timed local
    reduction on this machine (``harness.models.measure_gamma``) unless given. ``source``:
    ``native`` fits Open MPI's forcible algorithms (``models.NATIVE_OPENMPI``), ``harness``
    the harness's own (``models.HARNESS``). Provenance: the summary's path and SHA-256 (a
    summary given as a frame: neither), library, source, date, the fit quality of each
    algorithm."""
    if source not in ("native", "harness"):
        raise ValueError(f"source: expected 'native' or 'harness', got {source!r}")
    if source == "native" and split_name(library)[0] != "openmpi":
        raise ValueError(f"library: the Table 1 models are of Open MPI's algorithms; native "
                         f"fits need library 'openmpi' (or a simulated 'openmpi@<platform>'), "
                         f"got {library!r}")
    df = allreduce_rows(load(summary_csv))
    # the cells that carry a time, undelayed (delay mode none, or a max delay of 0)
    df = df[timed_mask(df) & ((df["delay"] == "none") | (df["max_delay"] == 0))]
    gamma_how = "given"
    if gamma is None:
        gamma, gamma_how = models.measure_gamma(), "measure_gamma (np.add on this machine)"
    mapping = models.NATIVE_OPENMPI if source == "native" else models.HARNESS
    framed = isinstance(summary_csv, pd.DataFrame)
    digest = None if framed else hashlib.sha256(open(summary_csv, "rb").read()).hexdigest()
    summary_csv = "the summary" if framed else summary_csv
    params = models.fit_all(df, mapping, gamma=gamma, library=library, provenance={
        "source": f"fit of {source} algorithms to {summary_csv}", "summary_sha256": digest,
        "campaign": campaign, "gamma_from": gamma_how, "algorithm_map": mapping})
    if not params.ab:
        fits = params.provenance.get("fits", {})
        raise ValueError(f"no algorithm could be fitted from {summary_csv} ({library}, {source}): "
                         + "; ".join(f"{k}: {v.get('error')}" for k, v in fits.items()))
    return params
