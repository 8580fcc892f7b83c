"""Every report's tables, written in one place, and AUTO vs BEST (Castelló et al. 2021, Sec.
4.3) formatted (its rows come from ``harness.analysis.auto_vs_best``, whose names this module
also offers the reports: ``prepare``, ``auto_vs_best``, ``mibs`` ...).

A table is declared once: a header and rows of cells (or ``Block``s), its ``Layout`` (how it
is presented), and the numeric frame. ``write_table(frame, path_without_ext, caption,
header=..., rows=..., layout=...)`` renders the declared cells to ``.md``, ``.tex`` (booktabs)
and ``.html`` (the report page's fragment: the rows that claim nothing, oversubscribed or not
converged, folded under the table), and writes the frame as ``.csv`` (the numbers, times in
seconds), each atomically; ``write_table(table, path_without_ext, caption)`` alone writes an
``auto_vs_best`` table.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..analysis.auto_vs_best import (  # noqa: F401  (offered to the reports)
    AUTO, CONTEXT, MIB, TABLE_COLUMNS, auto_vs_best, constants, load_summary, mibs, prepare,
    row_number, varying)
from ..analysis.vocabulary import timed_mask  # noqa: F401  (read by the reports)
from ..fileio import atomic_write_text
from ..units import format_size  # noqa: F401  (the reports' size labels)
from . import style

# ----------------------------------------------------------------------------- formatting

TIME_UNITS = ((1.0, "s"), (1e3, "ms"), (1e6, "µs"))


def time_unit(seconds) -> tuple[float, str]:
    """(factor, unit) that shows ``seconds`` (a time, or the largest of several) in s, ms or µs."""
    v = np.abs(np.asarray(seconds, dtype=float))
    top = float(np.nanmax(v)) if v.size and np.isfinite(v).any() else 1.0
    return next((u for u in TIME_UNITS if top * u[0] >= 1), TIME_UNITS[-1])


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
    k, unit = time_unit(seconds)
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
T_NOTE = (" § a compared t-interval assumes what its repetitions reject (normality or "
          "independence; the CSV's t_assumptions says which): report.statistic: median "
          "compares medians instead.")


BOUND_NOTE = (" Of bound: the lower bound (Chan et al. 2007: ceil(log2 P) alpha + 2(P-1)/P n "
              "beta + (P-1)/P n gamma, with the campaign's ping-pong fit) / the time; 100% would "
              "be optimal, and above 100% the fit overstates the link (tables/bound).")


def note(table: pd.DataFrame) -> str:
    """The AUTO-vs-BEST table's note, for the statistic its times are (``results/view.py``)."""
    text = NOTE
    if table.attrs.get("statistic") == "median":
        text = (text.replace("Times are means with their 95% CI", "Times are medians with their "
                             "order-statistics 95% CI").replace("size/mean", "size/median"))
    if "t_assumptions" in table and table["t_assumptions"].fillna("").astype(bool).any():
        text += T_NOTE
    if "auto_of_bound" in table:
        text += BOUND_NOTE
    if "auto_ran" in table:
        text += (" AUTO ran: the catalogue's name for the library functions one AUTO call ran, "
                 "seen under gdb (harness whatran).")
    return text


def _percent(v) -> str:
    """A fraction of the lower bound as a percentage ('' where there is none)."""
    if not (isinstance(v, float) and math.isfinite(v)):
        return ""
    return f"{100 * v:.0f}%" if v >= 0.1 else f"{100 * v:.2g}%"


def display(table: pd.DataFrame) -> tuple[list[str], list[list[dict]]]:
    """Header and rows of the presentation table. Each cell is a dict with ``text`` and flags
    (``bold``, ``dagger``, ``numeric``, ``interval``) so Markdown and LaTeX render the same
    content."""
    keys = table.attrs.get("keys") or ["library", "library_version", "procs", "size"]
    ctx = [k for k in keys if k not in ("library", "library_version", "procs", "size")]
    ran = "auto_ran" in table  # what AUTO ran, beside BEST (the auto_ran stage)
    header = ["Library", "P", *[c.replace("_", " ") for c in ctx], "Size",
              "AUTO time", "95% CI", "AUTO MiB/s", *(["AUTO ran"] if ran else []), "BEST",
              "BEST time", "95% CI", "BEST MiB/s", "Gain",
              *(["AUTO of bound", "BEST of bound"] if "auto_of_bound" in table else []),
              "Excluded"]
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
            cell(aci, numeric=True, interval=True),
            cell(_num(r["auto_mibs"]) if math.isfinite(r["auto_mibs"]) else "", numeric=True),
            *([cell(str(r.get("auto_ran") or ""))] if ran else []),
            cell(algorithm_label(r["best_algorithm"]) if r["best_algorithm"] else "none"),
            cell(bt, numeric=True, dagger=r["best_status"] == "not-converged"),
            cell(bci, numeric=True, interval=True),
            cell(_num(r["best_mibs"]) if math.isfinite(r["best_mibs"]) else "", numeric=True),
            cell((f"{g:.2f}×" if math.isfinite(g) else "n/a")
                 + (" (tie)" if r["verdict"] == "tie" else "")
                 + (" ‡" if r["oversubscribed"] else "")
                 + (" §" if r.get("t_assumptions") else ""), numeric=True,
                 bold=bool(r["significant"])),
            *([cell(_percent(r["auto_of_bound"]), numeric=True),
               cell(_percent(r["best_of_bound"]), numeric=True)] if "auto_of_bound" in r else []),
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


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "µ": r"$\mu$", "×": r"$\times$", "–": "--", "†": r"$^\dagger$", "§": r"\S{}", "‡": r"$^\ddagger$", "≈": r"$\approx$"}


def tex_escape(text: str, symbols: dict[str, str] | None = None) -> str:
    """``text`` as LaTeX; ``symbols``: more characters to translate, e.g. Δ to ``$\\Delta$``."""
    extra = symbols or {}
    return "".join(extra.get(ch, _TEX.get(ch, ch)) for ch in str(text))


# ------------------------------------------------------------------------ writing tables
#
# Every report writes its tables through ``write_table``: ``.md``, ``.tex`` (booktabs),
# ``.csv`` and ``.html``. A row is a list of cells, a cell a string (or any value, shown with
# ``str``) or a dict: ``text``; ``tex``, the LaTeX text when it differs from the Markdown
# (before escaping); flags ``bold``, ``dagger`` (a †), ``interval`` (LaTeX: small, in
# brackets) and ``numeric`` (HTML: right-aligned).


@dataclass(frozen=True)
class Layout:
    """How a table is presented, apart from its cells: a report declares it once."""
    env: str = "table"  # LaTeX: \begin{env}[placement]
    placement: str = ""
    align: str | None = None  # "l"/"r" per column, its last letter repeated (Markdown
    #                           :---/---:, LaTeX's column letters); None: --- and LaTeX "l"
    bold_header: bool = False  # LaTeX
    bold_caption: bool = False  # Markdown
    escape: bool = True  # Markdown: escape the cells' |
    placeholder: str | None = None  # Markdown: every cell of one row shown when there is none
    group_first: bool = False  # LaTeX: the first cell only where it changes, a rule there
    span: str | None = None  # LaTeX: a heading over every column but the first
    symbols: dict[str, str] | None = field(default=None, hash=False)  # LaTeX: more characters
    #                                                                    to translate
    md_note: str = ""  # Markdown (and HTML) after the table(s), a blank line before it
    preamble: tuple[str, str] = ("", "")  # (Markdown, LaTeX) before the table(s)
    label: str | None = None  # LaTeX \label of one table (write_table: tab:<name> if None)
    tex_caption: str | None = None  # the caption as LaTeX, when more than the caption escaped

    def but(self, **changes) -> Layout:
        """This layout with some fields changed."""
        return replace(self, **changes)


PLAIN = Layout()


class Rule(str):
    """A row of LaTeX only between rows (``\\midrule``, ``\\addlinespace``); Markdown has none."""


class Section(str):
    """A row naming the rows below it, in italics across the table."""


class Block(NamedTuple):
    """One table of a file that holds several: header, rows, caption and ``\\label`` (none when
    empty); ``tex_caption``, the caption as LaTeX when it is more than the caption escaped."""
    header: list
    rows: list
    caption: str = ""
    label: str = ""
    tex_caption: str | None = None


def _text(cell) -> str:
    return str(cell["text"] if isinstance(cell, dict) else cell)


def _spec(align: str | None, n: int) -> str:
    """``n`` column letters of ``align`` ("l"/"r", its last letter repeated; None: "l")."""
    align = align or "l"
    return (align + align[-1] * n)[:n]


def _cell(cell) -> dict:
    return cell if isinstance(cell, dict) else {"text": cell}


def _marked(text: str, cell: dict, dagger: str, bold: str) -> str:
    """``text`` (not empty) with the cell's ``dagger`` and in ``bold`` (a format) if flagged."""
    text += dagger if cell.get("dagger") and text else ""
    return bold.format(text) if cell.get("bold") and text else text


def _md_cell(cell, escape: bool) -> str:
    c = _cell(cell)
    return _marked(str(c["text"]).replace("|", "\\|") if escape else str(c["text"]), c, " †",
                   "**{}**")


def _tex_cell(cell, esc) -> str:
    if not isinstance(cell, dict):
        return esc(cell)
    t = _marked(esc(cell.get("tex", cell["text"])), cell, r"$^\dagger$", r"\textbf{{{}}}")
    return rf"{{\scriptsize [{t}]}}" if cell.get("interval") and t else t


def _markdown(b: Block, lay: Layout) -> str:
    n, align = len(b.header), lay.align
    lines = ["| " + " | ".join(_text(h) for h in b.header) + " |",
             "|" + ("|".join(":---" if a == "l" else "---:" for a in _spec(align, n)) + "|"
                    if align else "---|" * n)]
    for row in b.rows:
        if isinstance(row, Section):
            lines.append(f"| *{row}* |" + " |" * (n - 1))
        elif not isinstance(row, Rule):
            lines.append("| " + " | ".join(_md_cell(c, lay.escape) for c in row) + " |")
    if lay.placeholder is not None and not b.rows:
        lines.append("| " + " | ".join(lay.placeholder for _ in b.header) + " |")
    caption = (f"**{b.caption}**" if lay.bold_caption else b.caption) + "\n\n" if b.caption else ""
    return caption + "\n".join(lines) + "\n"


def _latex(b: Block, lay: Layout) -> str:
    def esc(text):
        return tex_escape(text, lay.symbols)

    n, span = len(b.header), lay.span
    head = [_tex_cell(h, esc) for h in b.header]
    head = [rf"\textbf{{{h}}}" for h in head] if lay.bold_header else head
    out = [rf"\begin{{{lay.env}}}" + (f"[{lay.placement}]" if lay.placement else ""), r"\centering",
           r"\small"]
    if b.caption:
        out.append(rf"\caption{{{esc(b.caption) if b.tex_caption is None else b.tex_caption}}}")
    if b.label:
        out.append(rf"\label{{{b.label}}}")
    out += [rf"\begin{{tabular}}{{{_spec(lay.align, n)}}}", r"\toprule"]
    if span:  # the header's first cell, then one heading over the other columns
        out += [rf"{head[0]} & \multicolumn{{{n - 1}}}{{c}}{{{esc(span)}}} \\",
                rf"\cmidrule(l){{2-{n}}}"]
        head = ["", *head[1:]]
    out += [" & ".join(head) + r" \\", r"\midrule"]
    prev = None
    for row in b.rows:
        if isinstance(row, Rule):
            out.append(str(row))
            continue
        if isinstance(row, Section):
            out.append(rf"\multicolumn{{{n}}}{{l}}{{\emph{{{esc(row)}}}}} \\")
            continue
        cells = [_tex_cell(c, esc) for c in row]
        if lay.group_first:  # the first cell once per run of equal ones, a rule between runs
            if _text(row[0]) == prev:
                cells[0] = ""
            elif prev is not None:
                out.append(r"\midrule")
            prev = _text(row[0])
        out.append(" & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", rf"\end{{{lay.env}}}", ""]
    return "\n".join(out)


# marks of a row that claims nothing: oversubscribed (‡) or not converged (†)
QUIET_MARKS = ("‡", "†")
QUIET_WORDS = ("oversubscribed", "not-converged", "not converged")


def claims_nothing(row) -> bool:
    """A row measured oversubscribed or not converged: a cell marked ‡ or † (or flagged
    ``dagger``), or saying so in words (a status or verdict)."""
    for cell in row:
        text = _text(cell).strip()
        if (isinstance(cell, dict) and cell.get("dagger") and text) or any(
                m in text for m in QUIET_MARKS):
            return True
        if text in QUIET_WORDS or any(text.endswith(f"({w})") for w in QUIET_WORDS):
            return True
    return False


def _html_table(header, rows, align) -> str:
    n = len(header)
    spec = _spec(align, n) if align else "l" * n
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(_text(h))}</th>" for h in header)
           + "</tr></thead><tbody>"]
    for row in rows:
        if isinstance(row, Section):
            out.append(f'<tr><td colspan="{n}"><i>{html.escape(row)}</i></td></tr>')
            continue
        tds = []
        for c, a in zip(map(_cell, row), spec.ljust(len(row), "l")):
            t = _marked(html.escape(str(c["text"])), c, " †", "<b>{}</b>")
            tds.append(f'<td class="num">{t}</td>' if c.get("numeric") or a == "r" else f"<td>{t}</td>")
        out.append("<tr>" + "".join(tds) + "</tr>")
    return "\n".join(out + ["</tbody></table>"])


def _html(b: Block, align) -> str:
    """One block as HTML: the rows that claim something, then the others folded."""
    said, quiet, section = [], [], None
    for row in b.rows:
        if isinstance(row, (Rule, Section)):
            section = row if isinstance(row, Section) else section
            continue
        into = quiet if claims_nothing(row) else said
        if section is not None and section not in into:
            into.append(section)
        into.append(row)
    out = [f'<p class="tcap">{html.escape(b.caption)}</p>'] if b.caption else []
    if said or not quiet:
        out.append(_html_table(b.header, said, align))
    if quiet:
        n = sum(not isinstance(r, Section) for r in quiet)
        out.append(f"<details><summary>{n} row{'s' * (n != 1)} that claim{'s' * (n == 1)} nothing "
                   "(oversubscribed or not converged)</summary>"
                   + _html_table(b.header, quiet, align) + "</details>")
    return "\n".join(out)


def _blocks(caption, header, rows, blocks, lay: Layout) -> list[Block]:
    if blocks is not None:
        return list(blocks)
    return [Block(list(header), list(rows), caption, lay.label or "", lay.tex_caption)]


def render_html(caption: str = "", *, header=(), rows=(), blocks: list[Block] | None = None,
                layout: Layout = PLAIN) -> str:
    """The HTML fragment of a table declared as for ``render``."""
    text = [f'<p class="note">{html.escape(t.strip())}</p>'
            for t in (layout.preamble[0].lstrip("# "),) if t.strip()]
    text += [_html(b, layout.align) for b in _blocks(caption, header, rows, blocks, layout)]
    if layout.md_note.strip():
        text.append(f'<p class="note">{html.escape(layout.md_note.strip())}</p>')
    return "\n".join(text) + "\n"


def render(caption: str = "", *, header=(), rows=(), blocks: list[Block] | None = None,
           layout: Layout = PLAIN) -> tuple[str, str]:
    """The Markdown and the LaTeX (booktabs) text of a table: ``header`` and ``rows`` under
    ``caption``, or several ``blocks``, each its own table; presented as ``layout`` says."""
    blocks = _blocks(caption, header, rows, blocks, layout)
    md = layout.preamble[0] + "\n".join(_markdown(b, layout) for b in blocks)
    tex = layout.preamble[1] + "\n".join(_latex(b, layout) for b in blocks)
    return md + ("\n" + layout.md_note if layout.md_note else ""), tex


def write_table(frame: pd.DataFrame, path_without_ext, caption: str = "", *, header=None,
                rows=(), blocks: list[Block] | None = None,
                layout: Layout | None = None) -> list[Path]:
    """Write ``<path>.md``, ``<path>.tex`` (booktabs), ``<path>.csv`` (``frame``, the
    numbers: times in seconds) and ``<path>.html`` (the page's), each atomically; returns the
    paths. The label is ``tab:<name>`` unless ``layout`` gives one; with no ``header`` and no
    ``blocks``, ``frame`` is an ``auto_vs_best`` table, presented as ``display`` does."""
    base = Path(path_without_ext)
    base.parent.mkdir(parents=True, exist_ok=True)
    if header is None and blocks is None:
        header, rows, auto = _auto_vs_best(frame, caption)
        layout = layout or auto
    layout = layout or PLAIN
    if layout.label is None:
        layout = layout.but(label=f"tab:{base.name.replace('_', '-')}")
    table = dict(header=header or (), rows=rows, blocks=blocks, layout=layout)
    md, tex = render(caption, **table)
    paths = [base.parent / f"{base.name}.{ext}" for ext in ("md", "tex", "csv", "html")]
    for path, text in zip(paths, (md, tex, frame.to_csv(index=False), render_html(caption, **table))):
        atomic_write_text(path, text)
    return paths


def cells_of(frame: pd.DataFrame) -> dict:
    """``write_table``'s ``header`` and ``rows`` for a frame of already formatted cells."""
    return dict(header=list(frame.columns), rows=list(frame.itertuples(index=False)))


def _auto_vs_best(table: pd.DataFrame, caption: str) -> tuple[list, list, Layout]:
    """Header, rows and layout of an ``auto_vs_best`` table: a booktabs ``table*``."""
    header, rows = display(table)
    text = note(table)
    tex = tex_escape(text).replace(r"2\textasciicircum{}20", r"$2^{20}$")
    return header, rows, Layout(
        env="table*", placement="t", bold_header=True, bold_caption=True, group_first=True,
        md_note=text + "\n", tex_caption=f"{tex_escape(caption)} {tex}",
        align="".join("r" if n else "l" for n in _numeric_columns(header, rows)))


def to_markdown(table: pd.DataFrame, caption: str = "") -> str:
    """The Markdown of an ``auto_vs_best`` table."""
    header, rows, layout = _auto_vs_best(table, caption)
    return render(caption, header=header, rows=rows, layout=layout)[0]


def plain_markdown(header: list[str], rows: list[list[str]], caption: str = "") -> str:
    """A Markdown table of already formatted text, the caption above it."""
    return render(caption, header=header, rows=rows)[0]
