"""The PAP paper's tables and figures (Proficz 2018, Tables 3-4, Figs. 10-12), from a
campaign's ``summary.csv`` alone.

PAP cells are the rows whose ``params`` carry ``compute`` (the benchmark's compute phase,
``harness.measure.arrival``); the ring among them is the reference. An algorithm's label is its name,
with the arrival knowledge in brackets when it is not the default oracle (``prr (online)``).
The max-delay-0 column is the delay-mode ``none`` cell, shared by every delay mode. Only
cells with a time (status ok / not-converged) are used; ``†`` marks not converged ones.

- ``write_tables(d, tables_dir)``: ``pap_table3`` and ``pap_table4`` (the rows:
  ``harness/analysis/pap.py``) as ``.md``, ``.tex`` (booktabs, one table per block) and
  ``.csv`` (the tidy numbers, times in seconds).
- ``fig10``/``fig11``/``fig12``: mean elapsed vs max delay, vs size, vs P, 95% CI bars.
- ``make(inputs)``: all of them; the CLI is ``python -m harness.report pap --store
  results/<c>``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.pap import GROUP, by_mode, label_order, pap_rows, table3, table4
from . import facets, style, tables

# ------------------------------------------------------------------------------------- data

def _mark(verdict: str) -> str:
    return {"tie": " ≈", "oversubscribed": " ‡"}.get(verdict, "")


# ------------------------------------------------------------------------------- rendering

def _ms(seconds: float) -> str:
    v = seconds * 1e3
    return f"{v:.1f}" if abs(v) >= 1 else f"{v:.3f}"


def _delay_header(max_delay: float) -> str:
    return "0" if max_delay == 0 else f"{max_delay * 1e3:g}"


def _block_title(key: dict, extra: str) -> str:
    lib = style.library_label(key["library"], key["library_version"])
    return (f"{lib}, P = {int(key['procs'])}, {key['dtype']} {key['op']}, {extra}")


def _by_delay(rows: pd.DataFrame, delays, entry) -> tuple[list, list]:
    """An entry's two lines of ``(text, bold, dagger)`` cells, one per max delay:
    ``entry(row)`` gives the pair of the delay's row, blank where there is none (or it gives
    None)."""
    cells = {r.max_delay: r for r in rows.itertuples(index=False)}
    blank = (("", False, False),) * 2
    pairs = [(entry(cells[md]) if md in cells else None) or blank for md in delays]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _blocks3(t3: pd.DataFrame):
    keys = GROUP + ["size", "mode"]
    for key, g in t3.groupby(keys, sort=True):
        key = dict(zip(keys, key))
        delays = sorted(g["max_delay"].unique())
        body = []
        for label in label_order(g["label"]):
            body.append((label, *_by_delay(g[g["label"] == label], delays, lambda r: (
                (_ms(r.mean), r.better, r.status == "not-converged"),
                ((f"{r.speedup:.2f}" if r.speedup == r.speedup else "n/a") + _mark(r.verdict),
                 r.better, False)))))
        title = _block_title(key, f"{tables.format_size(key['size'])}, {key['mode']}")
        yield title + _bound_text(g), delays, body


def _bound_text(g: pd.DataFrame) -> str:
    """``; bound (Δ − δ) 1.2 ms (Δ 3.4 ms, δ 2.2 ms: shortest tail)`` for a Table 3 block."""
    if "bound" not in g.columns or not np.isfinite(g["bound"]).any():
        return ""
    r = g[np.isfinite(g["bound"])].iloc[0]
    return (f"; bound (Δ − δ) {_ms(r['bound'])} ms (Δ {_ms(r['Delta'])} ms, "
            f"δ {_ms(r['delta'])} ms: {r['delta_source']})")


def _blocks4(t4: pd.DataFrame):
    keys = GROUP + ["label"]
    for key, g in t4.groupby(keys, sort=True):
        key = dict(zip(keys, key))
        delays = sorted(g["max_delay"].unique())
        sections = []
        for mode in sorted(g["mode"].unique()):
            gm = g[g["mode"] == mode]
            body = []
            for size in sorted(gm["size"].unique()):
                body.append((tables.format_size(size), *_by_delay(
                    gm[gm["size"] == size], delays, lambda r: None if r.diff != r.diff else (
                        (f"{r.diff * 1e3:+.1f}".replace("-", "−"), r.better, False),
                        (f"{r.speedup:.2f}" + _mark(r.verdict), r.better, False)))))
            sections.append((mode, body))
        title = _block_title(key, f"{key['label']} vs ring")
        yield title, delays, sections


NOTE3 = ("Each entry: the average elapsed time in ms (mean over repetitions of the mean over "
         "ranks) and, below, the speedup over the ring (ring / algorithm). Bold: faster than "
         "the ring beyond noise (the 95% CIs do not overlap); ≈ a tie (they overlap); ‡ "
         "oversubscribed (more ranks than cores: no win or loss drawn). Max delay in ms (0: no "
         "delay). † not converged to the requested precision. Bound (Δ − δ): the most any "
         "algorithm can save by knowing the arrival times (Sect. 3); Δ the ring's time with "
         "balanced arrivals, δ one transfer of the message between two processes (pingpong, "
         "else the shortest time from the last arrival to the last exit measured).")
NOTE4 = ("Each entry: the difference of the average elapsed times in ms (algorithm − ring) "
         "and, below, the speedup (ring / algorithm). Bold: faster than the ring beyond noise "
         "(the 95% CIs do not overlap); ≈ a tie; ‡ oversubscribed (no win or loss drawn). Max "
         "delay in ms.")


def _cells(cells) -> list[dict]:
    """``(text, bold, dagger)`` as ``tables`` cells, LaTeX with a hyphen for the minus."""
    return [{"text": t, "tex": t.replace("−", "-"), "bold": b, "dagger": d} for t, b, d in cells]


def _header(first: str, delays) -> list:
    return [{"text": f"{first} ↓ / Max delay →", "tex": first}, *map(_delay_header, delays)]


# a booktabs table per block, its columns the max delays; Table 3's bound symbols in LaTeX
# also for pdfLaTeX
LAYOUT = tables.Layout(placement="t", align="lr", span="Max delay (ms)", bold_caption=True,
                       escape=False)
SYMBOLS3 = {"Δ": r"$\Delta$", "δ": r"$\delta$", "−": "-"}
EMPTY = {"blocks": [], "layout": tables.Layout(
    preamble=("No PAP cells with a time.\n", "% no PAP cells with a time\n"))}


def _layout3(t3: pd.DataFrame) -> dict:
    """``tables.write_table``'s keywords for Table 3."""
    if not len(t3):
        return EMPTY
    blocks = []
    for i, (title, delays, body) in enumerate(_blocks3(t3)):
        rows = []
        for j, (label, times, speed) in enumerate(body):
            if j:
                rows.append(tables.Rule(r"\addlinespace"))
            rows += [[label, *_cells(times)], ["", *_cells(speed)]]
        blocks.append(tables.Block(_header("Algorithm", delays), rows, title,
                                   f"tab:pap-table3-{i + 1}",
                                   tables.tex_escape(f"{title}. {NOTE3}", SYMBOLS3)))
    return dict(blocks=blocks, layout=LAYOUT.but(
        symbols=SYMBOLS3, preamble=(f"# PAP Table 3: algorithms × max delay\n\n{NOTE3}\n\n",
                                    "% PAP Table 3 (needs \\usepackage{booktabs})\n\n")))


def _layout4(t4: pd.DataFrame) -> dict:
    """``tables.write_table``'s keywords for Table 4."""
    if not len(t4):
        return EMPTY
    blocks = []
    for i, (title, delays, sections) in enumerate(_blocks4(t4)):
        rows = []
        for k, (mode, body) in enumerate(sections):
            if k:
                rows.append(tables.Rule(r"\midrule"))
            rows.append(tables.Section(mode))
            for size, diff, speed in body:
                rows += [[size, *_cells(diff)], ["", *_cells(speed)]]
        blocks.append(tables.Block(_header("Size", delays), rows, title, f"tab:pap-table4-{i + 1}",
                                   tables.tex_escape(f"{title}. {NOTE4}")))
    return dict(blocks=blocks, layout=LAYOUT.but(
        preamble=(f"# PAP Table 4: size × max delay, vs the ring\n\n{NOTE4}\n\n",
                  "% PAP Table 4 (needs \\usepackage{booktabs})\n\n")))


def table3_markdown(t3: pd.DataFrame) -> str:
    """Table 3 as ``pap_table3.md`` holds it."""
    return tables.render(**_layout3(t3))[0]


def write_tables(df: pd.DataFrame, tables_dir, raw_dir=None) -> list[Path]:
    """``pap_table3.{md,tex,csv}`` and ``pap_table4.{md,tex,csv}`` in ``tables_dir``; with
    ``raw_dir`` (the campaign's ``raw/``) Table 3 carries the Sect. 3 bound."""
    base = Path(tables_dir)
    t3, t4 = table3(df, raw_dir), table4(df)
    return (tables.write_table(t3, base / "pap_table3", **_layout3(t3))
            + tables.write_table(t4, base / "pap_table4", **_layout4(t4)))


# ---------------------------------------------------------------------------------- figures

def _base(label: str) -> str:
    """The algorithm of a line's label (``prr`` of ``prr (online) · MPICH P=4``)."""
    return label.split(" (")[0].split(" · ")[0].split(" P=")[0]


def _look(label: str) -> facets.Look:
    """The algorithm's look (``style``); a variant of its arrival knowledge (``prr (online)``)
    dashed."""
    return dataclasses.replace(facets.algorithm_look(_base(label)),
                               ls="--" if " (" in label else "-")


def _order(labels) -> list[str]:
    rank = {b: i for i, b in enumerate(label_order({_base(x) for x in labels}))}
    return sorted(labels, key=lambda x: (rank[_base(x)], x))


def _spec(**kw) -> facets.Spec:
    """Figs. 10-12: rows of panels by delay mode, a line per algorithm, linear times from 0."""
    return facets.Spec(rows="mode", series="label", ylog=False, look=_look, order=_order,
                       ylabel="average elapsed", after=lambda ax, *_: ax.set_ylim(bottom=0),
                       **kw)


def _by_mode(d: pd.DataFrame) -> pd.DataFrame:
    """The rows of every delay mode with ``mode`` (the delay-none rows in each), a line per P
    when several."""
    if d["procs"].nunique() > 1:
        d = d.assign(label=d["label"] + [f" P={int(p)}" for p in d["procs"]])
    return pd.concat([g.assign(mode=m) for m, g in by_mode(d)]) if len(d) else d


def _context(d: pd.DataFrame) -> str:
    parts = []
    for (lib, ver), _ in d.groupby(["library", "library_version"]):
        parts.append(style.library_label(lib, ver))
    procs = sorted(d["procs"].unique())
    return ", ".join(parts) + (f", P = {', '.join(str(int(p)) for p in procs)}" if procs else "")


def _with_setup_label(d: pd.DataFrame) -> pd.DataFrame:
    """Several libraries or P in one figure: the setup goes into the line label."""
    d = d.copy()
    if d["library"].nunique() > 1:
        d["label"] = d["label"] + " · " + d["library"].map(style.library_title)
    return d


def fig10(df: pd.DataFrame, path_without_ext) -> list[Path]:
    """Mean elapsed time vs max delay (Fig. 10): rows = delay modes, columns = sizes, one
    line per algorithm (per P when several)."""
    d = _with_setup_label(pap_rows(df))
    spec = _spec(x="max_delay", cols="size", title="Average elapsed time vs max delay (PAP Fig. "
                 "10)" + (f" — {_context(d)}" if len(d) else ""),
                 panel_title=lambda k: f"{tables.format_size(k['size'])}, {k['mode']}")
    return facets.figure(spec, _by_mode(d), path_without_ext, empty="no PAP cells")


def fig11(df: pd.DataFrame, path_without_ext) -> list[Path]:
    """Mean elapsed time vs size (Fig. 11): rows = delay modes, columns = max delays."""
    d = _with_setup_label(pap_rows(df))
    spec = _spec(x="size", cols="max_delay", title="Average elapsed time vs size (PAP Fig. 11)"
                 + (f" — {_context(d)}" if len(d) else ""),
                 panel_title=lambda k: f"{k['mode']}, max delay {_delay_header(k['max_delay'])} ms")
    return facets.figure(spec, _by_mode(d), path_without_ext, empty="no PAP cells")


def fig12(df: pd.DataFrame, path_without_ext) -> list[Path]:
    """Mean elapsed time vs P (Fig. 12) at the largest max delay: rows = delay modes,
    columns = sizes."""
    d = _by_mode(_with_setup_label(pap_rows(df)))
    top = float(d["max_delay"].max()) if len(d) else 0.0
    if len(d):  # each mode at its largest max delay (the delay-none rows at 0)
        d = d[d["max_delay"] == np.where(d["mode"] == "none", 0.0, top)]
    spec = _spec(x="procs", cols="size", title=f"Average elapsed time vs P at max delay "
                 f"{_delay_header(top)} ms (PAP Fig. 12)",
                 panel_title=lambda k: f"{tables.format_size(k['size'])}, {k['mode']}")
    return facets.figure(spec, d, path_without_ext, empty="no PAP cells")


def make(inputs) -> list[Path]:
    """Tables 3-4 (Table 3 with the bound from the store's ``raw/``) and Figs. 10-12 of the
    campaign's PAP cells; returns the written paths."""
    df = inputs.summary
    written = write_tables(df, inputs.tables, raw_dir=inputs.store / "raw")
    for name, fn in (("pap_fig10", fig10), ("pap_fig11", fig11), ("pap_fig12", fig12)):
        written += fn(df, inputs.figures / name)
    return written
