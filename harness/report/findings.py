"""The campaign's claims, first on its report page: one line each, with its evidence and a
link to the table it comes from. Read from the stages' tables (``tables/*.csv``), so a claim
is exactly what a table says:

- the confirmation (``auto_vs_best_confirmed``): BEST or AUTO faster in fresh A B B A
  launches, the gain's 95 % interval clear of 1 (and the Wilcoxon test beside it);
- the performance guidelines (``guidelines``): a mock-up of the library's own collectives
  faster than AUTO, the 95 % intervals apart;
- the tuned selection (``tuned``): the library following the campaign's tuning file faster
  or slower than AUTO in fresh interleaved launches;
- AUTO's costliest decision per library (``auto_vs_best_confirmed`` with ``auto_choices``):
  what AUTO ran where a confirmed BEST beats it by most, and the sizes where it does so.

Ties are counted, not listed; nothing from an oversubscribed launch is claimed (its verdict
says ``oversubscribed``, and the tables carry no other verdict for it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..analysis.claims import costliest_decisions, number, read_table, verdicts
from . import style
from .guidelines import LABELS
from .tables import format_size


@dataclass(frozen=True)
class Finding:
    text: str  # the claim
    evidence: str  # the numbers that carry it
    table: Path  # where it comes from


def _where(r) -> str:
    """Library, P and size, and the conditions that tell two rows of one size apart: rotated
    (cold) buffers, IMB timing."""
    where = f"{style.library_title(str(r['library']))} P={int(r['procs'])} {format_size(int(r['size']))}"
    if r.get("buffers") == "rotate":
        where += " rotated buffers"
    if r.get("timing") == "imb":
        where += " (IMB timing)"
    return where


def _interval(g, lo, hi) -> str:
    g, lo, hi = number(g), number(lo), number(hi)
    return f"{g:.2f}x [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) else f"{g:.2f}x"


def _launches(r, ratio: str) -> str:
    """The gain of fresh paired launches with its interval: the evidence of a confirmed claim."""
    return (f"{ratio} {_interval(r['gain'], r['gain_ci_low'], r['gain_ci_high'])} over "
            f"{int(number(r.get('pairs')) or 0)} paired launches")


def confirmed(tables_dir: Path) -> tuple[list[Finding], int]:
    path = tables_dir / "auto_vs_best_confirmed.csv"
    rows, ties = verdicts(path, ("BEST faster", "AUTO faster"), "tie")
    out = []
    for r in rows or []:
        best = str(r.get("best") or "").replace("native:", "")
        who = f"BEST ({best}) faster than AUTO" if r["verdict"] == "BEST faster" \
            else f"AUTO faster than BEST ({best})"
        p = number(r.get("wilcoxon_p"))
        beside = f"; Wilcoxon p = {p:.3f} ({r.get('nonparametric')})" if math.isfinite(p) else ""
        out.append(Finding(f"{_where(r)}: {who}, confirmed in fresh launches",
                           _launches(r, "gain t_AUTO/t_BEST") + beside, path))
    return out, ties


VIOLATED = "is faster than the library's own Allreduce (performance guideline violated)"


def guideline_violations(tables_dir: Path) -> tuple[list[Finding], int]:
    """The violations the confirmation stage measured again and confirmed
    (``guidelines_confirmed``); without that stage, the campaign's own, said to rest on one
    launch per side."""
    again = tables_dir / "guidelines_confirmed.csv"
    rows, ties = verdicts(again, ("violation confirmed",), lambda v: v.startswith("not confirmed"))
    if rows is not None:
        return [Finding(f"{_where(r)}: {LABELS.get(r['best'], r['best'])} {VIOLATED}, confirmed "
                        "in fresh launches", _launches(r, "speedup t_AUTO/t_mock-up"), again)
                for r in rows], ties
    path = tables_dir / "guidelines.csv"
    rows, ties = verdicts(path, ("violation",), "tie")
    return [Finding(f"{_where(r)}: {LABELS.get(r['mock_up'], r['mock_up'])} {VIOLATED}",
                    f"speedup t_AUTO/t_mock-up {number(r['speedup']):.2f}x, 95% CIs apart "
                    f"(AUTO {number(r['auto_mean']) * 1e6:.2f} us, mock-up "
                    f"{number(r['mock_mean']) * 1e6:.2f} us), one launch each, not measured again",
                    path) for r in rows or []], ties


def tuned_gains(tables_dir: Path) -> tuple[list[Finding], int]:
    path = tables_dir / "tuned.csv"
    rows, ties = verdicts(path, ("tuned faster", "AUTO faster"), "tie")
    out = []
    for r in rows or []:
        held = " (held out: not measured by the campaign)" if str(r.get("held_out")) == "True" else ""
        who = "the tuning file beats AUTO" if r["verdict"] == "tuned faster" \
            else "AUTO beats the tuning file"
        out.append(Finding(f"{_where(r)}{held}: {who}", _launches(r, "gain t_AUTO/t_tuned"), path))
    return out, ties


def costliest_auto_choices(tables_dir: Path) -> tuple[list[Finding], int]:
    """Per library, AUTO's decision that costs most: the confirmed BEST-faster row with the
    largest gain, what AUTO ran there (``auto_choices``) and BEST, with the sizes of that P
    where the same pair of decisions is confirmed too."""
    path = tables_dir / "auto_vs_best_confirmed.csv"
    out = []
    for top, same in costliest_decisions(read_table(path),
                                         read_table(tables_dir / "auto_choices.csv")):
        best = str(top["best"]).replace("native:", "")
        sizes = (format_size(same[0]) if len(same) == 1 else
                 f"{format_size(same[0])} to {format_size(same[-1])} ({len(same)} sizes)")
        out.append(Finding(
            f"{style.library_title(str(top['library']))}: AUTO's costliest decision is {top['auto_ran']} at "
            f"P={int(top['procs'])}, {sizes}, where {best} is faster (confirmed)",
            f"at {format_size(int(top['size']))}: gain t_AUTO/t_BEST "
            f"{_interval(top['gain'], top['gain_ci_low'], top['gain_ci_high'])}; what AUTO ran was "
            f"seen under gdb (auto_choices)", path))
    return out, 0


def findings(tables_dir) -> tuple[list[Finding], int]:
    """Every claim of the campaign's tables, and how many comparisons were ties."""
    tables_dir = Path(tables_dir)
    claims, ties = [], 0
    for source in (confirmed, costliest_auto_choices, guideline_violations, tuned_gains):
        found, tied = source(tables_dir)
        claims += found
        ties += tied
    return claims, ties
