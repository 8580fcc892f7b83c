"""``harness tune <c> --compare <truth>``: the tuning files of one campaign (e.g. an adaptive
one) against those of the exhaustive truth, point by point of the truth: the algorithm each
file runs there (AUTO where no rule matches), and their times in the truth where they differ
(``tables/tuning_vs_<truth>.{md,tex,csv}``); and how far apart the two campaigns time the
same cells (``campaign_noise``), the floor below which a regret or cost is the launches' noise
(computed in ``harness/analysis/tuning_compare.py``, written here).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..analysis.tuning_compare import (  # noqa: F401  (offered to the command)
    COMPARE_COLUMNS,
    NOISE_COLUMNS,
    auto_ran_at,
    campaign_noise,
    compare_tunings,
)
from . import style, tables
from .regret_style import percent

COMPARE_CAPTION = ("The tuning files of {other} against those of the exhaustive {truth} at every "
                   "point of {truth}: the algorithm each runs there (AUTO where no rule matches), "
                   "its regret t/t(BEST) - 1 in {truth}'s measurements, and where they differ the "
                   "cost t(other's choice)/t(exhaustive's choice) - 1.")


def write_comparison(frame: pd.DataFrame, tables_dir, truth: str, other: str) -> list[Path]:
    shown = pd.DataFrame({
        "library": frame["library"].map(style.library_title), "P": frame["procs"].astype(str),
        "size": frame["size"].map(tables.format_size),
        truth: frame["exhaustive"].map(tables.algorithm_label),
        other: frame["other"].map(tables.algorithm_label),
        f"regret {truth}": frame["exhaustive_regret"].map(percent),
        f"regret {other}": frame["other_regret"].map(percent),
        "cost where they differ": frame["cost"].map(percent)})
    return tables.write_table(frame, Path(tables_dir) / f"tuning_vs_{truth}",
                              COMPARE_CAPTION.format(truth=truth, other=other),
                              **tables.cells_of(shown))
