"""AUTO vs BEST (Castelló et al. 2021, Sec. 4.3) as a table.

``auto_vs_best(summary)`` gives one row per library x P x message size (and per dtype, op,
delay, max_delay, late_rank, nodes, metric when those vary in the input): the time of
``native:auto`` (AUTO), the BEST native algorithm (``harness.analysis.best``: the lowest mean
among the ``native:*`` cells that carry a time, status ``ok`` or ``not-converged``), AUTO
included, so BEST is never slower than AUTO -- and gain = AUTO time / BEST time. Cells with status wrong, failed or timeout
are never candidates; they are listed in the ``excluded`` column.

``write_table(table, path_without_ext, caption)`` writes ``.md``, ``.tex`` (booktabs) and
``.csv`` (the numeric table, times in seconds), each atomically.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.best import SELECTING, TIMED, fastest, timed_mask  # noqa: F401  (TIMED, timed_mask: read by the reports)
from ..results import allreduce_rows
from ..fileio import atomic_write_text
from ..units import format_size  # noqa: F401  (the reports' size labels)
from . import style

AUTO = style.AUTO
MIB = float(2**20)
# Columns that define the conditions of a cell besides library, P and size; a table or figure
# splits by them only when they vary.
CONTEXT = ["nodes", "dtype", "op", "delay", "max_delay", "late_rank", "metric"]
NUMERIC = ["procs", "nodes", "size", "max_delay", "late_rank", "mean", "ci_low", "ci_high", "n"]

TABLE_COLUMNS = [
    "auto_status", "auto_mean", "auto_ci_low", "auto_ci_high", "auto_mibs",
    "best_algorithm", "best_status", "best_mean", "best_ci_low", "best_ci_high", "best_mibs",
    "gain", "gain_low", "gain_high", "significant", "verdict", "oversubscribed",
    "n_algorithms", "n_timed", "excluded",
]


def row_oversubscribed(row) -> bool:
    return row is not None and str(row.get("oversubscribed", "")).lower() == "true"


# --------------------------------------------------------------------------- data preparation

def load_summary(path) -> pd.DataFrame:
    return prepare(pd.read_csv(path, keep_default_na=True))


def prepare(df: pd.DataFrame, workloads: bool = False) -> pd.DataFrame:
    """A clean copy of a summary: numeric columns numeric, missing context columns filled,
    status/algorithm as strings, and one row per cell (the newest, by ``finished``). Workload
    rows (a training iteration, ``harness.dnn.workload``) are left out unless ``workloads``."""
    d = allreduce_rows(df, workloads=workloads).copy()
    defaults = {"library_version": "", "nodes": 1, "dtype": "float64", "op": "sum",
                "delay": "none", "max_delay": 0.0, "late_rank": 0, "metric": "mean",
                "params": "{}", "status": "ok", "finished": "", "error": ""}
    for col, val in defaults.items():
        if col not in d.columns:
            d[col] = val
        elif col in CONTEXT and d[col].isna().any():
            # a cell that never ran (failed before its first repetition) may lack a condition:
            # it takes the one the other cells share (else the default), not one of its own
            known = d[col].dropna()
            d[col] = d[col].fillna(known.mode().iloc[0] if len(known) else val)
    for col in ("ci_low", "ci_high"):
        if col not in d.columns:
            d[col] = np.nan
    for col in NUMERIC:
        d[col] = pd.to_numeric(d[col], errors="coerce")
    for col in ("library", "algorithm", "status", "dtype", "op", "delay", "metric"):
        d[col] = d[col].astype(str)
    d["library_version"] = d["library_version"].fillna("").astype(str)
    # a cell that failed before its first repetition records no version: it takes its
    # library's version when the library was measured in exactly one
    for lib, versions in d.groupby("library")["library_version"]:
        known = set(versions) - {""}
        if len(known) == 1:
            d.loc[(d["library"] == lib) & (d["library_version"] == ""), "library_version"] = (
                known.pop())
    d["params"] = d["params"].fillna("{}").astype(str)
    d["finished"] = d["finished"].fillna("").astype(str)
    ident = ["library", "library_version", "algorithm", "params", "procs", "size", *CONTEXT]
    d = d.sort_values("finished", kind="stable").drop_duplicates(ident, keep="last")
    return d.reset_index(drop=True)


def varying(d: pd.DataFrame, cols=CONTEXT) -> list[str]:
    return [c for c in cols if c in d.columns and d[c].nunique(dropna=False) > 1]


def constants(d: pd.DataFrame, cols=CONTEXT) -> dict:
    return {c: d[c].iloc[0] for c in cols if c in d.columns and len(d) and d[c].nunique(dropna=False) == 1}


def mibs(size, seconds):
    """Throughput in MiB/s (2**20 bytes) of ``size`` bytes in ``seconds``; NaN if unusable."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(size, dtype=float) / np.asarray(seconds, dtype=float) / MIB
    out = np.where(np.isfinite(out) & (out > 0), out, np.nan)
    return out if out.ndim else float(out)


# --------------------------------------------------------------------------------- the table

def row_number(row, col):
    if row is None:
        return math.nan
    try:
        v = float(row[col])
    except (KeyError, TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def auto_vs_best(df: pd.DataFrame) -> pd.DataFrame:
    """The AUTO-vs-BEST table of a summary (see the module doc). Only ``native:*`` rows are
    considered. Columns: library, library_version, procs, the varying context columns, size,
    then ``TABLE_COLUMNS``; times in seconds, throughputs in MiB/s. ``attrs["context"]`` holds
    the context columns that are constant (e.g. ``{"dtype": "float64", ...}``)."""
    d = prepare(df)
    d = d[d["algorithm"].str.startswith("native:") & ~d["algorithm"].isin(SELECTING)]
    ctx = varying(d)
    keys = ["library", "library_version", "procs", *ctx, "size"]
    ok = timed_mask(d)
    rows = []
    for key, g in d.groupby(keys, dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        gt = g[ok.loc[g.index]]
        autos = g[g["algorithm"] == AUTO]
        a = autos.iloc[-1] if len(autos) else None
        a_timed = a is not None and bool(ok.loc[autos.index[-1]])
        b = fastest(g)
        am = row_number(a, "mean") if a_timed else math.nan
        al = row_number(a, "ci_low") if a_timed else math.nan
        ah = row_number(a, "ci_high") if a_timed else math.nan
        bm, bl, bh = row_number(b, "mean"), row_number(b, "ci_low"), row_number(b, "ci_high")
        size = float(row["size"])
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = am / bm if a_timed and b is not None else math.nan
            gain_low = al / bh if a_timed and bh > 0 else math.nan
            gain_high = ah / bl if a_timed and bl > 0 else math.nan
        if b is not None and b["algorithm"] == AUTO:
            gain_low = gain_high = 1.0  # AUTO is BEST: the gain is 1 by construction
        bad = g[~ok.loc[g.index]].sort_values("algorithm")
        crowded = row_oversubscribed(a) or row_oversubscribed(b)
        significant = bool(a_timed and b is not None and b["algorithm"] != AUTO and bh < al
                           and not crowded)
        if crowded:
            verdict = "oversubscribed"  # ranks shared cores: no win or loss is drawn
        elif b is None or not a_timed:
            verdict = "no data"
        elif b["algorithm"] == AUTO:
            verdict = "AUTO is BEST"
        else:
            verdict = "BEST faster" if significant else "tie"
        row.update({
            "auto_status": a["status"] if a is not None else "missing",
            "auto_mean": am, "auto_ci_low": al, "auto_ci_high": ah, "auto_mibs": mibs(size, am),
            "best_algorithm": b["algorithm"] if b is not None else "",
            "best_status": b["status"] if b is not None else "",
            "best_mean": bm, "best_ci_low": bl, "best_ci_high": bh, "best_mibs": mibs(size, bm),
            "gain": gain, "gain_low": gain_low, "gain_high": gain_high,
            # BEST is faster than AUTO beyond noise: the two 95% CIs do not overlap (never
            # drawn from an oversubscribed launch); otherwise the gain is a tie
            "significant": significant, "verdict": verdict, "oversubscribed": crowded,
            "n_algorithms": int(g["algorithm"].nunique()),
            "n_timed": int(gt["algorithm"].nunique()),
            "excluded": "; ".join(f"{r.algorithm} ({r.status})" for r in bad.itertuples()),
        })
        rows.append(row)
    out = pd.DataFrame(rows, columns=keys + TABLE_COLUMNS)
    if len(out):
        out["_lib"] = out["library"].map(lambda x: style.library_sort_key(x))
        out = out.sort_values(["_lib", "library_version", "procs", *ctx, "size"], kind="stable")
        out = out.drop(columns="_lib").reset_index(drop=True)
    out.attrs["context"] = constants(d)
    out.attrs["keys"] = keys
    return out


# ----------------------------------------------------------------------------- formatting

def time_unit(seconds: float) -> tuple[str, float]:
    a = abs(seconds)
    if a >= 1:
        return "s", 1.0
    if a >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def _num(v: float) -> str:
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def format_time(seconds: float, low: float = math.nan, high: float = math.nan) -> tuple[str, str]:
    """(``"12.3 µs"``, ``"11.9–12.8"``): the mean and its CI in the mean's unit."""
    if not math.isfinite(seconds):
        return "", ""
    unit, k = time_unit(seconds)
    ci = f"{_num(low * k)}–{_num(high * k)}" if math.isfinite(low) and math.isfinite(high) else ""
    return f"{_num(seconds * k)} {unit}", ci


def algorithm_label(name: str) -> str:
    if name == AUTO:
        return "AUTO"
    return name.split(":", 1)[1] if name.startswith("native:") else name


def context_value_label(col: str, v) -> str:
    if col == "max_delay":
        return format_time(float(v))[0] if float(v) > 0 else "0"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


NOTE = ("Times are means with their 95% CI; MiB/s = size/mean (2^20 B). Gain = AUTO time / "
        "BEST time; bold: the two 95% CIs do not overlap; (tie): they overlap, so no win is "
        "claimed. † not converged to the requested precision. ‡ oversubscribed: more ranks "
        "than cores, times not comparable, no win or loss drawn.")


def display(table: pd.DataFrame) -> tuple[list[str], list[list[dict]]]:
    """Header and rows of the presentation table. Each cell is a dict with ``text`` and flags
    (``bold``, ``dagger``, ``numeric``) so Markdown and LaTeX render the same content."""
    keys = table.attrs.get("keys") or ["library", "library_version", "procs", "size"]
    ctx = [k for k in keys if k not in ("library", "library_version", "procs", "size")]
    header = ["Library", "P", *[c.replace("_", " ") for c in ctx], "Size",
              "AUTO time", "95% CI", "AUTO MiB/s", "BEST", "BEST time", "95% CI", "BEST MiB/s",
              "Gain", "Excluded"]
    rows = []
    for r in table.itertuples(index=False):
        r = r._asdict()
        cell = lambda text, **kw: {"text": text, **kw}
        at, aci = format_time(r["auto_mean"], r["auto_ci_low"], r["auto_ci_high"])
        bt, bci = format_time(r["best_mean"], r["best_ci_low"], r["best_ci_high"])
        if not at:
            at = r["auto_status"]
        g = r["gain"]
        rows.append([
            cell(style.library_label(r["library"], r["library_version"])),
            cell(str(int(r["procs"])), numeric=True),
            *[cell(context_value_label(c, r[c]), numeric=c in ("nodes", "max_delay", "late_rank"))
              for c in ctx],
            cell(format_size(r["size"]), numeric=True),
            cell(at, numeric=True, dagger=r["auto_status"] == "not-converged"),
            cell(aci, numeric=True),
            cell(_num(r["auto_mibs"]) if math.isfinite(r["auto_mibs"]) else "", numeric=True),
            cell(algorithm_label(r["best_algorithm"]) if r["best_algorithm"] else "none"),
            cell(bt, numeric=True, dagger=r["best_status"] == "not-converged"),
            cell(bci, numeric=True),
            cell(_num(r["best_mibs"]) if math.isfinite(r["best_mibs"]) else "", numeric=True),
            cell((f"{g:.2f}×" if math.isfinite(g) else "n/a")
                 + (" (tie)" if r["verdict"] == "tie" else "")
                 + (" ‡" if r["oversubscribed"] else ""), numeric=True,
                 bold=bool(r["significant"])),
            cell(", ".join(algorithm_label(x.split(" (")[0]) + " (" + x.split(" (")[1]
                           for x in r["excluded"].split("; ")) if r["excluded"] else ""),
        ])
    return header, rows


def _numeric_columns(header, rows) -> list[bool]:
    """Right-align a column when every non-empty cell of it is numeric (and one exists)."""
    out = []
    for i in range(len(header)):
        filled = [row[i] for row in rows if row[i]["text"]]
        out.append(bool(filled) and all(c.get("numeric") for c in filled) and i > 0)
    return out


def to_markdown(table: pd.DataFrame, caption: str = "") -> str:
    header, rows = display(table)
    numeric = _numeric_columns(header, rows)

    def md(c):
        t = c["text"].replace("|", "\\|")
        if c.get("dagger") and t:
            t += " †"
        if c.get("bold") and t:
            t = f"**{t}**"
        return t

    lines = []
    if caption:
        lines += [f"**{caption}**", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---:" if n else ":---" for n in numeric) + "|")
    for row in rows:
        lines.append("| " + " | ".join(md(c) for c in row) + " |")
    lines += ["", NOTE, ""]
    return "\n".join(lines)


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "µ": r"$\mu$", "×": r"$\times$", "–": "--", "†": r"$^\dagger$", "‡": r"$^\ddagger$", "≈": r"$\approx$"}


def tex_escape(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def to_latex(table: pd.DataFrame, caption: str = "", label: str = "") -> str:
    """A booktabs ``table*`` (needs ``\\usepackage{booktabs}``)."""
    header, rows = display(table)
    numeric = _numeric_columns(header, rows)
    ci_cols = [i for i, h in enumerate(header) if h == "95% CI"]

    def tex(c, i):
        t = tex_escape(c["text"])
        if c.get("dagger") and t:
            t += r"$^\dagger$"
        if c.get("bold") and t:
            t = rf"\textbf{{{t}}}"
        if i in ci_cols and t:
            t = rf"{{\scriptsize [{t}]}}"
        return t

    spec = "".join("r" if n else "l" for n in numeric)
    out = [r"\begin{table*}[t]", r"\centering", r"\small"]
    if caption:
        note = tex_escape(NOTE).replace(r"2\textasciicircum{}20", r"$2^{20}$")
        out.append(rf"\caption{{{tex_escape(caption)} {note}}}")
    if label:
        out.append(rf"\label{{{label}}}")
    out += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
            " & ".join(rf"\textbf{{{tex_escape(h)}}}" for h in header) + r" \\", r"\midrule"]
    prev = None
    for row in rows:
        first = row[0]["text"] != prev
        if prev is not None and first:
            out.append(r"\midrule")
        cells = [tex(c, i) for i, c in enumerate(row)]
        if not first:
            cells[0] = ""
        prev = row[0]["text"]
        out.append(" & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table*}", ""]
    return "\n".join(out)


def write_table(df: pd.DataFrame, path_without_ext, caption: str = "") -> list[Path]:
    """Write ``<path>.md``, ``<path>.tex`` (booktabs) and ``<path>.csv`` (the numeric table,
    times in seconds) for an ``auto_vs_best`` table; each atomically. Returns the paths."""
    base = Path(path_without_ext)
    base.parent.mkdir(parents=True, exist_ok=True)
    md, tex, csv = (base.parent / f"{base.name}.{ext}" for ext in ("md", "tex", "csv"))
    atomic_write_text(md, to_markdown(df, caption))
    atomic_write_text(tex, to_latex(df, caption, label=f"tab:{base.name.replace('_', '-')}"))
    atomic_write_text(csv, df.to_csv(index=False))
    return [md, tex, csv]


def plain_markdown(header: list[str], rows: list[list[str]], caption: str = "") -> str:
    """A Markdown table of already formatted text, the caption above it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return (caption + "\n\n" if caption else "") + "\n".join(lines) + "\n"


def plain_latex(header: list[str], rows: list[list[str]], caption: str = "",
                label: str = "") -> str:
    """A booktabs table of already formatted text."""
    out = [r"\begin{table}", r"\centering", r"\small"]
    if caption:
        out.append(r"\caption{" + tex_escape(caption) + "}")
    if label:
        out.append(r"\label{" + label + "}")
    out += [r"\begin{tabular}{" + "l" * len(header) + "}", r"\toprule",
            " & ".join(tex_escape(h) for h in header) + r" \\", r"\midrule"]
    out += [" & ".join(tex_escape(c) for c in r) + r" \\" for r in rows]
    out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out) + "\n"
