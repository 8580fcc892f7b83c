"""What the regret tables and figures share (``harness.report.regret``, ``regret_judged``,
``tuning_compare``): percentages, the policies' colours (the median curve over seeds:
``harness.analysis.replay.median_curve``)."""

from __future__ import annotations

import math

from .style import SERIES_COLORS

FLOOR = 1e-4  # a regret of 0 is drawn here on the log axis


def percent(x) -> str:
    return f"{100 * x:.1f} %" if isinstance(x, (int, float)) and math.isfinite(x) else ""


POLICY_STYLE = {policy: (SERIES_COLORS[policy], label) for policy, label in (
    ("adaptive", "adaptive (surrogate)"), ("random", "random cells"), ("grid", "fixed grid"))}
