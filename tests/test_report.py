"""Report tables and figures on small synthetic summaries (no MPI)."""

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from harness.report import figures, style, tables  # noqa: E402
from harness.report.inputs import Inputs  # noqa: E402
from harness.results.store import SUMMARY_COLUMNS  # noqa: E402


def row(library, algorithm, size, mean, status="ok", procs=4, hw=0.05, **kw):
    """One summary row; the CI is mean * (1 -/+ hw)."""
    timed = status in ("ok", "not-converged")
    r = {c: None for c in SUMMARY_COLUMNS}
    r.update(campaign="t", cell_id=f"{library}-{algorithm}-{procs}-{size}", run_id="r1",
             library=library, library_version={"mpich": "MPICH Version:      5.0.2",
                                               "openmpi": "Open MPI v5.0.11, package: x",
                                               "impi": "Intel(R) MPI Library 2021.18.1"}[library],
             algorithm=algorithm, procs=procs, nodes=1, size=size, count=size // 8,
             dtype="float64", op="sum", delay="none", max_delay=0.0, late_rank=0, params="{}",
             metric="mean", n=10 if timed else 0, status=status,
             mean=mean if timed else np.nan,
             ci_low=mean * (1 - hw) if timed else np.nan,
             ci_high=mean * (1 + hw) if timed else np.nan,
             error="" if timed else "boom", finished="2026-01-01T00:00:00")
    r.update(kw)
    return r


@pytest.fixture
def summary():
    rows = [
        # 4 KiB: recursive_doubling beats AUTO by 2x; ring is 'wrong' with the lowest time
        row("mpich", "native:auto", 4096, 20e-6),
        row("mpich", "native:recursive_doubling", 4096, 10e-6),
        row("mpich", "native:ring", 4096, 1e-6, status="wrong"),
        row("mpich", "native:tree", 4096, 30e-6, status="not-converged"),
        # 1 MiB: AUTO is the best; a failed cell is excluded
        row("mpich", "native:auto", 2**20, 1e-3),
        row("mpich", "native:recursive_doubling", 2**20, 4e-3),
        row("mpich", "native:ring", 2**20, 2e-3),
        row("mpich", "native:tree", 2**20, 0.1e-3, status="failed"),
        # openmpi: only AUTO, one size
        row("openmpi", "native:auto", 65536, 100e-6),
        # impi: AUTO times out, ring is best
        row("impi", "native:auto", 65536, 1.0, status="timeout"),
        row("impi", "native:ring", 65536, 50e-6),
        row("impi", "native:rabenseifner", 65536, 80e-6, status="not-converged"),
    ]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def cell(table, library, size):
    sel = table[(table["library"] == library) & (table["size"] == size)]
    assert len(sel) == 1
    return sel.iloc[0]


def test_best_and_gain(summary):
    t = tables.auto_vs_best(summary)
    assert len(t) == 4
    r = cell(t, "mpich", 4096)
    assert r["best_algorithm"] == "native:recursive_doubling"
    assert r["best_mean"] == pytest.approx(10e-6)
    assert r["auto_mean"] == pytest.approx(20e-6)
    assert r["gain"] == pytest.approx(2.0)
    assert r["gain_low"] == pytest.approx(0.95 / 1.05 * 2.0)
    assert r["gain_high"] == pytest.approx(1.05 / 0.95 * 2.0)
    assert bool(r["significant"])
    assert r["auto_mibs"] == pytest.approx(4096 / 20e-6 / 2**20)
    assert r["best_mibs"] == pytest.approx(4096 / 10e-6 / 2**20)
    assert "native:ring (wrong)" in r["excluded"]
    # AUTO itself is the best: gain exactly 1, never below
    r = cell(t, "mpich", 2**20)
    assert r["best_algorithm"] == "native:auto"
    assert r["gain"] == pytest.approx(1.0)
    assert not r["significant"]
    assert (t["gain"].dropna() >= 1.0).all()


def test_wrong_failed_timeout_never_best(summary):
    t = tables.auto_vs_best(summary)
    # the wrong (1 us) and failed (0.1 ms) cells are the fastest numbers but never chosen
    assert cell(t, "mpich", 4096)["best_algorithm"] != "native:ring"
    assert cell(t, "mpich", 2**20)["best_algorithm"] != "native:tree"
    assert "native:tree (failed)" in cell(t, "mpich", 2**20)["excluded"]
    # AUTO timed out: listed with its status, no time, no gain; BEST still named
    r = cell(t, "impi", 65536)
    assert r["auto_status"] == "timeout"
    assert math.isnan(r["auto_mean"]) and math.isnan(r["gain"])
    assert r["best_algorithm"] == "native:ring"
    # only AUTO
    r = cell(t, "openmpi", 65536)
    assert r["best_algorithm"] == "native:auto" and r["gain"] == pytest.approx(1.0)


def test_all_failed_cell_has_no_best():
    df = pd.DataFrame([row("mpich", "native:auto", 4096, 1e-5, status="failed"),
                       row("mpich", "native:ring", 4096, 1e-5, status="wrong")])
    r = tables.auto_vs_best(df).iloc[0]
    assert r["best_algorithm"] == "" and math.isnan(r["best_mean"]) and math.isnan(r["gain"])


def test_varying_context_becomes_a_key(summary):
    other = summary.copy()
    other["dtype"] = "int32"
    other.loc[other["algorithm"] == "native:auto", "mean"] *= 10
    t = tables.auto_vs_best(pd.concat([summary, other]))
    assert "dtype" in t.columns and "op" not in t.columns
    assert len(t) == 8
    assert tables.auto_vs_best(summary).attrs["context"]["dtype"] == "float64"


def test_write_table(summary, tmp_path):
    t = tables.auto_vs_best(summary)
    paths = tables.write_table(t, tmp_path / "tab", "AUTO vs BEST")
    assert {p.suffix for p in paths} == {".md", ".tex", ".csv", ".html"}
    for p in paths:
        assert p.exists() and p.stat().st_size > 0
    tex = (tmp_path / "tab.tex").read_text()
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert "recursive\\_doubling" in tex and "$\\mu$s" in tex
    md = (tmp_path / "tab.md").read_text()
    assert "4KiB" in md and "1MiB" in md and "**2.00×**" in md and "timeout" in md
    back = pd.read_csv(tmp_path / "tab.csv")
    assert len(back) == len(t)
    page = (tmp_path / "tab.html").read_text()  # the page's: every row, none folded
    assert "<b>2.00×</b>" in page and "<details>" not in page
    crowded = summary.assign(oversubscribed=summary["library"] == "openmpi")
    tables.write_table(tables.auto_vs_best(crowded), tmp_path / "crowded", "AUTO vs BEST")
    said, folded = (tmp_path / "crowded.html").read_text().split("<details>")
    assert "Open MPI" not in said and folded.startswith("<summary>1 row that claims nothing")
    assert "Open MPI" in folded and "‡" in folded and "<b>2.00×</b>" in said
    assert not list(tmp_path.glob(".*"))  # no temporary files left


def test_formatting():
    assert tables.format_size(4096) == "4KiB"
    assert tables.format_size(2**20) == "1MiB"
    assert tables.format_size(100) == "100B"
    assert tables.format_time(12.34e-6, 12e-6, 13e-6) == ("12.3 µs", "12.0–13.0")
    assert tables.format_time(2.5e-3)[0] == "2.50 ms"
    assert style.library_label("mpich", "MPICH Version:      5.0.2") == "MPICH 5.0.2"
    assert style.library_label("impi", "Intel(R) MPI Library 2021.18.1") == "Intel MPI 2021.18.1"


def test_make_all(summary, tmp_path):
    csv = tmp_path / "summary.csv"
    summary.to_csv(csv, index=False)
    paths = figures.make(Inputs.of(csv, tmp_path / "tables", tmp_path / "figures"))
    names = {p.name for p in paths}
    for lib in ("mpich", "openmpi", "impi"):
        assert f"auto_vs_best_{lib}.png" in names and f"auto_vs_best_{lib}.pdf" in names
    assert {"auto_vs_best.md", "auto_vs_best.tex", "auto_vs_best.csv"} <= names
    for p in paths:
        assert p.exists() and p.stat().st_size > 0
    assert (tmp_path / "figures" / "auto_vs_best_mpich.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "figures" / "auto_vs_best_mpich.pdf").read_bytes()[:5] == b"%PDF-"


def test_make_all_several_conditions_and_procs(summary, tmp_path):
    other = summary.copy()
    other["delay"] = "one-late"
    other["max_delay"] = 0.001
    more = summary.copy()
    more["procs"] = 8
    csv = tmp_path / "summary.csv"
    pd.concat([summary, other, more]).to_csv(csv, index=False)
    names = {p.name for p in figures.make(Inputs.of(csv, tmp_path / "t", tmp_path / "f"))}
    assert "auto_vs_best_mpich_none_max_delay-0.png" in names
    assert "auto_vs_best_mpich_one-late_max_delay-1.00ms.png" in names
    with pytest.raises(ValueError, match="mix conditions"):
        figures.auto_vs_best_figure(pd.concat([summary, other]), "mpich", tmp_path / "x")


def test_colour_stable_across_figures(summary, tmp_path, monkeypatch):
    """An algorithm has one colour in every figure, whatever else the figure holds."""
    seen = []
    real_save = style.save

    def capture(fig, path):
        legend = {}
        for leg in fig.legends:
            for h, t in zip(leg.legend_handles, leg.get_texts()):
                legend[t.get_text()] = matplotlib.colors.to_hex(h.get_color())
        drawn = {matplotlib.colors.to_hex(line.get_color())
                 for ax in fig.axes for line in ax.get_lines() if len(line.get_xdata())}
        seen.append((legend, drawn))
        return real_save(fig, path)

    monkeypatch.setattr(style, "save", capture)
    # figure 1: MPICH (ring, recursive_doubling, tree); figure 2: Intel MPI (ring, rabenseifner)
    figures.auto_vs_best_figure(summary, "mpich", tmp_path / "a")
    figures.auto_vs_best_figure(summary, "impi", tmp_path / "b")
    ring = matplotlib.colors.to_hex(style.color("native:ring"))
    key = style.long_label("native:ring")
    assert seen[0][0][key] == seen[1][0][key] == ring
    assert ring in seen[0][1] and ring in seen[1][1]  # the plotted line, not only the legend
    assert seen[0][0][style.long_label("native:auto")] == "#000000"
    # a name outside the palette takes its colour from a SHA-1 of the name (here hue 179 deg,
    # saturation 0.74, value 0.59), not from hash(), which Python salts in every process: the
    # same colour in every figure of every run
    assert "some_new_algorithm" not in style.COLORS
    assert style.color("some_new_algorithm") == "#279694"
    assert style.color("native:ring") != style.color("native:recursive_doubling")


def test_known_colours_distinct_within_a_library():
    from harness import libraries
    for lib in libraries.catalogue().values():
        names = [f"native:{n}" if not n.startswith("native:") else n for n in lib.native_names()]
        colours = [style.color(n) for n in names]
        assert len(set(colours)) == len(colours), lib.name


def test_one_command_line_writes_any_report(summary, tmp_path, capsys):
    """``python -m harness.report NAME --store DIR ...`` (report/__main__.py): every
    registered report has its ``make``; a report is written and its files printed; a wrong
    name, option or a missing store is exit 2 with the usage, and nothing is written."""
    from harness.report import registry
    from harness.report.__main__ import main

    for report in registry.REPORTS.values():
        assert callable(report.load()), report.name
    csv = tmp_path / "summary.csv"
    summary.to_csv(csv, index=False)
    assert main(["auto_vs_best", "--summary", str(csv), "--tables", str(tmp_path / "t"),
                 "--figures", str(tmp_path / "f")]) == 0
    assert str(tmp_path / "f" / "auto_vs_best_impi.pdf") in capsys.readouterr().out.split()
    assert (tmp_path / "f" / "auto_vs_best_impi.pdf").exists()
    for bad, said in ((["nosuch", "--store", str(tmp_path)], "unknown report 'nosuch'"),
                      (["pap"], "give --store DIR"),
                      (["projection", "--store", str(tmp_path), "--params", "p.json"],
                       "p.json: no such file"),
                      (["sgd", "--store", str(tmp_path), "--bogus"], "unrecognized arguments"),
                      ([], "no report named")):
        assert main(bad) == 2
        assert said in capsys.readouterr().err
    assert main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in registry.REPORTS)


def test_ties_and_oversubscribed_cells_claim_no_win(tmp_path):
    """Overlapping CIs read as a tie; a launch with more ranks than cores gives no verdict."""
    import pandas as pd

    from harness.report.tables import auto_vs_best, to_markdown

    base = {"library": "mpich", "library_version": "MPICH 5", "procs": 2, "dtype": "float64",
            "op": "sum", "status": "ok", "params": "{}"}
    rows = []
    for size, auto, best, over in [(4096, (10, 9, 11), (9.5, 8.5, 10.5), False),
                                   (65536, (20, 19, 21), (10, 9.5, 10.5), False),
                                   (1 << 20, (200, 190, 210), (100, 95, 105), True)]:
        for alg, (m, lo, hi) in (("native:auto", auto), ("native:ring", best)):
            rows.append({**base, "algorithm": alg, "size": size, "mean": m * 1e-6, "n": 50,
                         "ci_low": lo * 1e-6, "ci_high": hi * 1e-6, "oversubscribed": over})
    t = auto_vs_best(pd.DataFrame(rows))
    assert list(t.verdict) == ["tie", "BEST faster", "oversubscribed"]
    assert list(t.significant) == [False, True, False]
    md = to_markdown(t)
    assert "(tie)" in md and "‡" in md and "**2.00×**" in md and "**2.00× ‡**" not in md


def test_harness_best_drawn_next_to_best(summary, tmp_path, monkeypatch):
    """Harness rows of the library in the figure's conditions add the fastest of them per size
    (a wrong row never counts; rows in other conditions are left out)."""
    extra = pd.DataFrame([
        row("mpich", "shm", 4096, 8e-6), row("mpich", "ring", 4096, 9e-6),
        row("mpich", "shm", 2**20, 0.5e-3), row("mpich", "ring", 2**20, 0.1e-3, status="wrong"),
        row("mpich", "ring", 2**20, 0.2e-3, delay="one-late", max_delay=0.001),
    ], columns=SUMMARY_COLUMNS)
    both = pd.concat([summary, extra])
    best = figures.harness_best(tables.prepare(extra[extra["delay"] == "none"]))
    assert list(zip(best["size"], best["algorithm"])) == [(4096, "shm"), (2**20, "shm")]
    seen = {}
    real_save = style.save

    def keep(fig, path):
        seen[str(path)] = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
        return real_save(fig, path)

    monkeypatch.setattr(style, "save", keep)
    csv = tmp_path / "summary.csv"
    both.to_csv(csv, index=False)
    figures.make(Inputs.of(csv, tmp_path / "t", tmp_path / "f"))
    assert "harness best (shm)" in seen[str(tmp_path / "f" / "auto_vs_best_mpich")]
    assert not any(t.startswith("harness best") for t in seen[str(tmp_path / "f" / "auto_vs_best_impi")])


def test_a_column_with_auto_alone_is_counted_not_drawn(tmp_path):
    """The AUTO-vs-BEST figure draws a column per P only where some algorithm besides AUTO
    has a time; the others are named in the title (a 3,641-pixel strip of one-point panels
    otherwise)."""
    from matplotlib.figure import Figure

    from harness.report import figures

    rows = [row("mpich", "native:auto", 4096, 20e-6, procs=2),
            row("mpich", "native:ring", 4096, 10e-6, procs=2)]
    rows += [row("mpich", "native:auto", 8, 5e-6, procs=p) for p in (3, 5, 7)]
    seen = {}
    save = figures.style.save

    def keep(fig: Figure, path):
        seen["axes"], seen["title"] = len(fig.axes), fig._suptitle.get_text()
        return save(fig, path)

    figures.style.save = keep
    try:
        figures.auto_vs_best_figure(pd.DataFrame(rows, columns=SUMMARY_COLUMNS), "mpich",
                                    tmp_path / "f")
    finally:
        figures.style.save = save
    assert seen["axes"] == 2  # one column: throughput and gain
    assert "not drawn: P = 3, 5, 7" in seen["title"]
