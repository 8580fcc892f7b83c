"""``harness tune regret <c> --judge <c2>``: the replayed choices timed in a second
campaign of the same cells (``harness.analysis.regret.judged``): ``tables/regret_judged`` (the
exhaustive BEST's own regret there, and each policy's regret and cost against that BEST after
10 %, 25 % and 50 % of the cells) and the figures' third panel."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import regret
from ..analysis.replay import (  # noqa: F401  (the judged table's rows)
    JUDGED_COLUMNS,
    JUDGED_SHARES,
    QUARTER,
    judge_table,
    judged_rows,
    median_curve,
)
from . import style
from .regret_style import POLICY_STYLE, percent

JUDGED_CAPTION = ("The choices replayed against {truth} timed in {judge}, another exhaustive "
                  "campaign of the same cells (its own launches; several, pooled: the mean of "
                  "their times per cell): the mean regret t/t(BEST) - 1 "
                  "there, and the mean cost against the exhaustive campaign's choices, "
                  "t(choice)/t({truth}'s BEST) - 1, after {shares} of {truth}'s cells (median "
                  "over the seeds [min, max]). The exhaustive row is {truth}'s BEST itself: what "
                  "measuring every cell once reaches in other launches, the floor a policy can "
                  "reach; a cost near 0 means the policy tunes as well as the exhaustive "
                  "campaign.")


def judged_display(frame: pd.DataFrame, titles: dict | None = None) -> pd.DataFrame:
    """``regret_judged.csv`` as printed (``titles``: the libraries' names in the table)."""
    out = []
    for r in frame.to_dict("records"):
        ranged = (lambda k: percent(r[k]) if r["policy"] == "exhaustive" or r[f"{k}_low"] ==
                  r[f"{k}_high"] else f"{percent(r[k])} [{percent(r[f'{k}_low'])}, "
                  f"{percent(r[f'{k}_high'])}]")
        out.append({"library": (titles or {}).get(r["library"]) or style.library_title(r["library"]),
                    "policy": r["policy"], "cells": f"{r['cells']:g} ({percent(r['share'])})",
                    f"regret in {r['judge']}": ranged("judged_regret"),
                    "cost vs exhaustive": ranged("judged_cost")})
    return pd.DataFrame(out)


def judged_panel(ax, d: pd.DataFrame, total: int, floor: float, judge_name: str) -> None:
    """The choices timed in the judging campaign: their mean cost against the exhaustive
    campaign's BEST (0: as good; median over the seeds, their range shaded) against cells
    measured, the 5 % line and the quarter of the cells (dotted); the exhaustive BEST's own
    regret there in the legend."""
    for name, group in d.groupby("policy", sort=True):
        color, _ = POLICY_STYLE.get(name, ("0.4", name))
        gx, mid, low, high = median_curve(group, "cells", "judged_cost")
        ax.plot(gx, 100 * mid, lw=1.6, color=color, drawstyle="steps-post")
        if group["seed"].nunique() > 1:
            ax.fill_between(gx, 100 * low, 100 * high, color=color, alpha=0.15, step="post", lw=0)
    ax.axhline(0, color="k", lw=1.0, ls="-.",
               label=f"exhaustive BEST (its regret there: {percent(floor)})")
    ax.axhline(100 * regret.TARGET, color="0.3", lw=0.8, ls=":")
    ax.axvline(QUARTER * total, color="0.5", lw=0.8, ls=":")
    ax.annotate("a quarter of the cells", (QUARTER * total, 1.0), xytext=(3, 0),
                textcoords="offset points", rotation=90, ha="left", va="top", fontsize=7,
                color="0.4", xycoords=("data", "axes fraction"))
    top = np.nanmax(np.r_[d["judged_cost"].to_numpy(float), regret.TARGET])
    ax.set_ylim(min(-0.05, np.nanmin(d["judged_cost"].to_numpy(float))) * 100 - 1,
                min(top, 1.0) * 100 + 2)
    ax.set_xlim(0, total * 1.03)
    ax.set_xlabel("cells measured")
    ax.set_ylabel("cost vs the exhaustive BEST (%)")
    ax.set_title(f"the same choices timed in {judge_name}", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")


