"""AUTO vs BEST (Castelló et al. 2021, Sec. 4.3) as a table: the rows come from
``harness.analysis.auto_vs_best`` (whose names this module also offers the reports:
``prepare``, ``auto_vs_best``, ``mibs`` ...); here they are formatted.

``write_table(table, path_without_ext, caption)`` writes ``.md``, ``.tex`` (booktabs) and
``.csv`` (the numeric table, times in seconds), each atomically.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..analysis.auto_vs_best import (  # noqa: F401  (offered to the reports)
    AUTO,
    CONTEXT,
    MIB,
    NUMERIC,
    TABLE_COLUMNS,
    auto_vs_best,
    constants,
    load_summary,
    mibs,
    prepare,
    row_number,
    row_oversubscribed,
    varying,
)
from ..analysis.best import SELECTING, TIMED, fastest, timed_mask  # noqa: F401  (read by the reports)
from ..fileio import atomic_write_text
from ..units import format_size  # noqa: F401  (the reports' size labels)
from . import style

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
