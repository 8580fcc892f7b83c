"""The PAP paper's tables and figures (Proficz 2018, Tables 3-4, Figs. 10-12), from a
campaign's ``summary.csv`` alone.

PAP cells are the rows whose ``params`` carry ``compute`` (the benchmark's compute phase,
``harness.measure.arrival``); the ring among them is the reference. An algorithm's label is its name,
with the arrival knowledge in brackets when it is not the default oracle (``prr (online)``).
The max-delay-0 column is the delay-mode ``none`` cell, shared by every delay mode. Only
cells with a time (status ok / not-converged) are used; ``†`` marks not converged ones.

- ``table3(d, raw_dir)``: per library, P, dtype, op, size and delay mode: mean elapsed time
  per algorithm and max delay, speedup = ring / algorithm; ``better`` when faster than the
  ring (bold in the paper-style renderings). With the campaign's ``raw/`` directory, each
  row also carries its measured lateness and tail (``raw_metrics``) and its block the
  Sect. 3 bound Δ − δ (``bounds``).
- ``table4(d)``: per library, P, dtype, op, delay mode and PRR variant: per size and max
  delay, the difference PRR - ring in ms and the speedup.
- ``write_tables(d, tables_dir)``: ``pap_table3`` and ``pap_table4`` as ``.md``, ``.tex``
  (booktabs, one table per block) and ``.csv`` (the tidy numbers, times in seconds).
- ``fig10``/``fig11``/``fig12``: mean elapsed vs max delay, vs size, vs P, 95% CI bars.
- ``raw_metrics(raw_dir, cell_ids)``: per cell, from the raw per-rank arrivals and exits:
  ``lateness`` (last arrival minus the mean of the others), ``tail`` (last exit minus last
  arrival), ``elapsed`` (mean over ranks of exit minus arrival), each a mean over repetitions.
- ``bounds(d, metrics, summary)``: per block (library, P, dtype, op, size) the Sect. 3 bound
  on what knowing the arrival times can save: Δ = the ring's elapsed time with balanced
  arrivals (its delay-``none`` cell), δ = the time to send the message between two processes
  (the campaign's ``pingpong`` cell of that library and size when there is one, else the
  shortest tail of the block's delayed cells, an upper estimate), bound = Δ − δ.
- ``make(inputs)``: all of them; the CLI is ``python -m harness.report pap --store
  results/<c>``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..analysis.pap import GROUP, by_mode, delay_modes, label_order, pap_rows, table3, table4
from . import style, tables

COLORS = {"ring": "#a50f15", "rabenseifner": "#08519c", "slt": "#7570b3", "prr": "#1b9e77",
          "slt (online)": "#b07aa1", "prr (online)": "#66a61e", "slt (none)": "#9e9ac8",
          "prr (none)": "#a1d99b"}
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


def _blocks3(t3: pd.DataFrame):
    keys = GROUP + ["size", "mode"]
    for key, g in t3.groupby(keys, sort=True):
        key = dict(zip(keys, key))
        delays = sorted(g["max_delay"].unique())
        body = []
        for label in label_order(g["label"]):
            cells = {r.max_delay: r for r in g[g["label"] == label].itertuples(index=False)}
            times, speed = [], []
            for md in delays:
                r = cells.get(md)
                if r is None:
                    times.append(("", False, False))
                    speed.append(("", False, False))
                    continue
                nc = r.status == "not-converged"
                times.append((_ms(r.mean), r.better, nc))
                speed.append(((f"{r.speedup:.2f}" if r.speedup == r.speedup else "n/a")
                              + _mark(r.verdict), r.better, False))
            body.append((label, times, speed))
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
                cells = {r.max_delay: r for r in gm[gm["size"] == size].itertuples(index=False)}
                diff, speed = [], []
                for md in delays:
                    r = cells.get(md)
                    if r is None or r.diff != r.diff:
                        diff.append(("", False, False))
                        speed.append(("", False, False))
                        continue
                    diff.append((f"{r.diff * 1e3:+.1f}".replace("-", "−"), r.better, False))
                    speed.append((f"{r.speedup:.2f}" + _mark(r.verdict), r.better, False))
                body.append((tables.format_size(size), diff, speed))
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
LAYOUT = dict(placement="t", align="lr", span="Max delay (ms)", bold_caption=True, escape=False)
SYMBOLS3 = {"Δ": r"$\Delta$", "δ": r"$\delta$", "−": "-"}
EMPTY = {"blocks": [], "preamble": ("No PAP cells with a time.\n", "% no PAP cells with a time\n")}


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
    return dict(blocks=blocks, symbols=SYMBOLS3, **LAYOUT,
                preamble=(f"# PAP Table 3: algorithms × max delay\n\n{NOTE3}\n\n",
                          "% PAP Table 3 (needs \\usepackage{booktabs})\n\n"))


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
    return dict(blocks=blocks, **LAYOUT,
                preamble=(f"# PAP Table 4: size × max delay, vs the ring\n\n{NOTE4}\n\n",
                          "% PAP Table 4 (needs \\usepackage{booktabs})\n\n"))


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

def _color(label: str) -> str:
    return COLORS.get(label) or style.color(label)




def _series(ax, g: pd.DataFrame, x: str, xscale=lambda v: v):
    for label in label_order(g["label"]):
        s = g[g["label"] == label].sort_values(x)
        xs = xscale(s[x].to_numpy(float))
        y = s["mean"].to_numpy(float) * 1e3
        err = np.vstack([y - s["ci_low"].to_numpy(float) * 1e3, s["ci_high"].to_numpy(float) * 1e3 - y])
        err = np.clip(np.nan_to_num(err, nan=0.0), 0, None)
        base = label.split(" (")[0]
        ax.errorbar(xs, y, yerr=err, color=_color(label), marker=style.marker(base), ms=3.5,
                    lw=1.1, capsize=2, elinewidth=0.8,
                    linestyle="--" if "(" in label else "-", label=label)
    ax.set_ylim(bottom=0)


def _panel_grid(rows, cols, title):
    style.setup()
    fig = Figure(figsize=(max(4.0, 3.0 * len(cols) + 0.6), 2.6 * len(rows) + 0.9),
                 layout="constrained")
    axes = fig.subplots(len(rows), len(cols), squeeze=False)
    fig.suptitle(title)
    return fig, axes


def _legend(fig, axes):
    handles, labels = {}, []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    labels = label_order(labels)
    if labels:
        fig.legend([handles[lab] for lab in labels], labels, loc="outside lower center",
                   ncol=min(len(labels), 5))


def _blank(ax, text="no PAP cells"):
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


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
    modes, sizes = delay_modes(d) if len(d) else ["none"], sorted(d["size"].unique()) or [0]
    fig, axes = _panel_grid(modes, sizes, "Average elapsed time vs max delay (PAP Fig. 10)"
                            + (f" — {_context(d)}" if len(d) else ""))
    for i, (mode, gm) in enumerate(by_mode(d) if len(d) else [("none", d)]):
        for j, size in enumerate(sizes):
            ax = axes[i, j]
            g = gm[gm["size"] == size]
            if g.empty:
                _blank(ax)
                continue
            for p, gp in g.groupby("procs"):
                if g["procs"].nunique() > 1:
                    gp = gp.assign(label=gp["label"] + f" P={int(p)}")
                _series(ax, gp, "max_delay", lambda v: v * 1e3)
            ax.set_title(f"{tables.format_size(size)}, {mode}")
            ax.set_xlabel("Max delay (ms)")
            ax.set_ylabel("Average elapsed (ms)")
            delays = sorted(g["max_delay"].unique())
            if len(delays) > 2 and delays[-1] / max(delays[1], 1e-9) > 20:
                ax.set_xscale("symlog", linthresh=max(delays[1], 1e-6) * 1e3)
                ax.set_xticks([m * 1e3 for m in delays])
                ax.xaxis.set_major_formatter(style.PLAIN_TICKS)
                ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    _legend(fig, axes)
    return style.save(fig, path_without_ext)


def fig11(df: pd.DataFrame, path_without_ext) -> list[Path]:
    """Mean elapsed time vs size (Fig. 11): rows = delay modes, columns = max delays."""
    d = _with_setup_label(pap_rows(df))
    modes = delay_modes(d) if len(d) else ["none"]
    delays = sorted(d["max_delay"].unique()) or [0.0]
    fig, axes = _panel_grid(modes, delays, "Average elapsed time vs size (PAP Fig. 11)"
                            + (f" — {_context(d)}" if len(d) else ""))
    for i, (mode, gm) in enumerate(by_mode(d) if len(d) else [("none", d)]):
        for j, md in enumerate(delays):
            ax = axes[i, j]
            g = gm[gm["max_delay"] == md]
            if g.empty:
                _blank(ax)
                continue
            for p, gp in g.groupby("procs"):
                if g["procs"].nunique() > 1:
                    gp = gp.assign(label=gp["label"] + f" P={int(p)}")
                _series(ax, gp, "size")
            ax.set_xscale("log", base=2)
            sizes = sorted(g["size"].unique())
            ax.set_xticks(sizes)
            ax.set_xticklabels([tables.format_size(s) for s in sizes])
            ax.set_title(f"{mode}, max delay {_delay_header(md)} ms")
            ax.set_xlabel("Message size per rank")
            ax.set_ylabel("Average elapsed (ms)")
    _legend(fig, axes)
    return style.save(fig, path_without_ext)


def fig12(df: pd.DataFrame, path_without_ext) -> list[Path]:
    """Mean elapsed time vs P (Fig. 12) at the largest max delay: rows = delay modes,
    columns = sizes."""
    d = _with_setup_label(pap_rows(df))
    modes, sizes = delay_modes(d) if len(d) else ["none"], sorted(d["size"].unique()) or [0]
    top = float(d["max_delay"].max()) if len(d) else 0.0
    fig, axes = _panel_grid(modes, sizes, f"Average elapsed time vs P at max delay "
                            f"{_delay_header(top)} ms (PAP Fig. 12)")
    for i, (mode, gm) in enumerate(by_mode(d) if len(d) else [("none", d)]):
        for j, size in enumerate(sizes):
            ax = axes[i, j]
            g = gm[(gm["size"] == size) & (gm["max_delay"] == (top if mode != "none" else 0.0))]
            if g.empty:
                _blank(ax)
                continue
            _series(ax, g, "procs")
            ps = sorted(g["procs"].unique())
            ax.set_xticks(ps)
            ax.set_xticklabels([str(int(p)) for p in ps])
            if len(ps) == 1:
                ax.set_xlim(ps[0] - 1, ps[0] + 1)
            ax.set_title(f"{tables.format_size(size)}, {mode}")
            ax.set_xlabel("Processes P")
            ax.set_ylabel("Average elapsed (ms)")
    _legend(fig, axes)
    return style.save(fig, path_without_ext)


def make(inputs) -> list[Path]:
    """Tables 3-4 (Table 3 with the bound from the store's ``raw/``) and Figs. 10-12 of the
    campaign's PAP cells; returns the written paths."""
    df = inputs.summary
    written = write_tables(df, inputs.tables, raw_dir=inputs.store / "raw")
    for name, fn in (("pap_fig10", fig10), ("pap_fig11", fig11), ("pap_fig12", fig12)):
        written += fn(df, inputs.figures / name)
    return written
