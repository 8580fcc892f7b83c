"""The cross-library report (``harness/report/cross_library.py``; Castelló et al., Fig. 6 and
Fig. 10 right) on a constructed summary: which rows count, AUTO/BEST per library, the ratios
over the reference's AUTO and when they are bold, the reference option and its errors, the
files, and the Snakemake rule's wiring."""

import copy
import json

import pandas as pd
import pytest
from conftest import REPO
from PIL import Image

from harness.campaign import config
from harness.report import cross_library as xl
from harness.report.inputs import Inputs

US = 1e-6
KIB = 1024


def _row(lib, alg, procs, size, mean, half=0.02, status="ok", params=None, over=False):
    params = params or {}
    return {"campaign": "t", "cell_id": f"c{lib}{alg}{procs}{size}{json.dumps(params)}",
            "library": lib, "library_version": {"mpich": "MPICH Version: 4.2.0",
                                                "openmpi": "Open MPI v5.0.8",
                                                "impi": "Intel(R) MPI Library 2021.13"}[lib],
            "algorithm": alg, "procs": procs, "nodes": 1, "size": size, "count": size // 8,
            "dtype": "float64", "op": "sum", "delay": "none", "max_delay": 0.0, "late_rank": 0,
            "params": json.dumps(params), "metric": "mean", "n": 20, "mean": mean,
            "ci_low": mean * (1 - half), "ci_high": mean * (1 + half), "status": status,
            "oversubscribed": over, "finished": "2026-01-01T00:00:00"}


# time in µs per (library, algorithm) at 4 KiB and 64 KiB; P = 4 is oversubscribed
TIMES = {
    ("mpich", "native:auto"): (10.0, 100.0), ("mpich", "native:ring"): (12.0, 50.0),
    ("openmpi", "native:auto"): (20.0, 80.0), ("openmpi", "native:ring"): (19.9, 90.0),
    ("impi", "native:auto"): (5.0, 100.0), ("impi", "native:ring"): (6.0, 99.0),
}


@pytest.fixture
def summary():
    rows = []
    for procs in (2, 4):
        for (lib, alg), times in TIMES.items():
            for size, t in zip((4 * KIB, 64 * KIB), times):
                rows.append(_row(lib, alg, procs, size, t * US, over=procs == 4))
    # none of these may count: a workload row, a ping-pong probe (faster than anything), a
    # harness allreduce (not native, so no BEST candidate) and a failed native cell
    rows.append(_row("mpich", "native:auto", 2, 1 << 20, 1e-3,
                     params={"workload": "resnet110", "fusion": "ddp"}))
    rows.append(_row("mpich", "pingpong", 2, 4 * KIB, 0.1 * US))
    rows.append(_row("mpich", "ring", 2, 4 * KIB, 0.2 * US))
    rows.append(_row("impi", "native:nreduce", 2, 4 * KIB, 0.3 * US, status="wrong"))
    return pd.DataFrame(rows)


def test_rows_auto_best_and_ratios_over_impi(summary):
    t = xl.table(summary)
    assert t.attrs["reference"] == "impi"  # measured: the default reference
    assert len(t) == 3 * 2 * 2 and set(t["size"]) == {4 * KIB, 64 * KIB}
    r = t.set_index(["procs", "size", "library"])
    m = r.loc[(2, 64 * KIB, "mpich")]
    assert m["best_algorithm"] == "native:ring" and m["best_mean"] == pytest.approx(50 * US)
    assert m["auto_speedup"] == pytest.approx(1.0)  # 100 µs vs Intel MPI's 100 µs
    assert m["best_speedup"] == pytest.approx(2.0)
    assert m["best_speedup_low"] == pytest.approx(100 * 0.98 / (50 * 1.02))
    assert m["best_significant"] and not m["auto_significant"]
    # openmpi at 4 KiB: 4x slower than Intel MPI's AUTO, beyond noise
    o = r.loc[(2, 4 * KIB, "openmpi")]
    assert o["auto_speedup"] == pytest.approx(0.25) and o["auto_significant"]
    # the reference's own AUTO is 1 and never bold
    i = r.loc[(2, 4 * KIB, "impi")]
    assert (i["auto_speedup"], i["auto_significant"]) == (1.0, False)
    # the ping-pong probe, the harness ring and the failed cell are no BEST
    assert r.loc[(2, 4 * KIB, "mpich")]["best_algorithm"] == "native:auto"
    assert r.loc[(2, 4 * KIB, "impi")]["best_algorithm"] == "native:auto"
    # oversubscribed: same ratios, never bold
    over = t[t["procs"] == 4]
    assert over["oversubscribed"].all()
    assert not over["auto_significant"].any() and not over["best_significant"].any()


def test_close_times_are_not_bold(summary):
    t = xl.table(summary, reference="openmpi").set_index(["procs", "size", "library"])
    # openmpi ring 19.9 µs vs its AUTO 20 µs: CIs overlap
    o = t.loc[(2, 4 * KIB, "openmpi")]
    assert o["best_speedup"] == pytest.approx(20 / 19.9) and not o["best_significant"]


def test_reference_option_and_fallback(summary):
    t = xl.table(summary, reference="mpich")
    assert t.attrs["reference"] == "mpich" and set(t["reference"]) == {"mpich"}
    no_impi = summary[summary["library"] != "impi"]
    assert xl.table(no_impi).attrs["reference"] == "mpich"  # the first library
    with pytest.raises(ValueError, match=r"'impi' has no native cells.*mpich, openmpi"):
        xl.table(no_impi, reference="impi")


def test_files_bold_and_oversubscribed_titles(summary, tmp_path):
    path = tmp_path / "summary.csv"
    summary.to_csv(path, index=False)
    written = xl.make(Inputs.of(path, tmp_path / "tables", tmp_path / "fig"))
    names = sorted(p.name for p in written)
    assert names == sorted(["cross_library.md", "cross_library.tex", "cross_library.csv",
                            "cross_library.html", "cross_library.png", "cross_library.pdf",
                            "cross_library_normalised.png", "cross_library_normalised.pdf"])
    md = (tmp_path / "tables" / "cross_library.md").read_text()
    assert "Intel MPI AUTO" in md and "**2.00×**" in md and "0.25×" in md
    tex = (tmp_path / "tables" / "cross_library.tex").read_text()
    assert r"\textbf{2.00$\times$}" in tex and "**" not in tex
    csv = pd.read_csv(tmp_path / "tables" / "cross_library.csv")
    assert {"auto_speedup", "best_speedup", "best_algorithm", "reference"} <= set(csv.columns)
    titles = [xl.panel_title(key, g) for key, g in xl.panels(xl.table(summary))]
    assert titles == ["P = 2", "P = 4 (oversubscribed: no claim)"]
    for name in ("cross_library.png", "cross_library_normalised.png"):
        w, h = Image.open(tmp_path / "fig" / name).size
        assert w > 1000  # two panels side by side


def test_empty_summary_still_writes_every_file(tmp_path):
    path = tmp_path / "summary.csv"
    pd.DataFrame([_row("mpich", "pingpong", 2, 4 * KIB, 1e-6)]).to_csv(path, index=False)
    written = xl.make(Inputs.of(path, tmp_path / "tables", tmp_path / "fig"))
    assert len(written) == 8 and all(p.stat().st_size > 0 for p in written)


BASE = {"campaign": "t", "experiments": {
    "e": {"libraries": ["mpich", "openmpi"], "algorithms": ["native:auto"], "procs": [2],
          "sizes": ["4KiB"]}}}


def test_config_reference_library():
    assert config.validate(copy.deepcopy(BASE)).report == {"reference_library": "mpich",
                                                           "statistic": "mean"}
    doc = copy.deepcopy(BASE)
    doc["experiments"]["e"]["libraries"].append("impi")
    assert config.validate(doc).report["reference_library"] == "impi"
    doc = dict(copy.deepcopy(BASE), report={"reference_library": "openmpi"})
    assert config.validate(doc).report["reference_library"] == "openmpi"
    doc["report"]["reference_library"] = "impi"
    with pytest.raises(config.ConfigError, match=r"report\.reference_library: 'impi' is not "
                       r"a library of the campaign; expected one of mpich, openmpi"):
        config.validate(doc)
    doc["report"] = {"reference": "impi"}
    with pytest.raises(config.ConfigError, match=r"report"):
        config.validate(doc)


def test_rule_is_wired_when_two_libraries_have_native_cells():
    """The registry's entry (harness/report/registry.py), which report.smk turns into rule
    report_cross_library and page.smk into outputs of `rule all` and the page: a campaign gets
    the report when two libraries or more have native cells, not with one."""
    from harness.report.registry import REPORTS, Facts

    entry = REPORTS["cross_library"]
    assert entry.rule_name == "report_cross_library" and entry.on_page and not entry.reads
    assert entry.applies(Facts(native_libraries=("impi", "mpich")))
    assert not entry.applies(Facts(native_libraries=("mpich",)))
    assert "f/cross_library_normalised.pdf" in entry.outputs("t", "f", Facts())
    assert entry.options(Facts(), {"reference_library": "impi"}) == {"reference": "impi"}
    assert "REPORT_OUTPUTS," in (REPO / "Snakefile").read_text()


def test_a_failed_cell_without_version_beside_timed_ones_draws(summary, tmp_path):
    """The shape that broke the cut-down paper campaign: a cell that failed before its first
    repetition has no library version, while the same library's other cells at that P and
    size have one; and a library measured in two versions. Both figures still draw, the
    failed cell joins its library's row, and each version is a series of its own."""
    extra = _row("mpich", "native:segmented_ring", 2, 64 * KIB, float("nan"), status="failed")
    extra["library_version"] = float("nan")  # what the summary holds for a cell that never ran
    extra_auto = _row("openmpi", "native:auto", 2, 4 * KIB, 30 * US)
    extra_auto["library_version"] = "Open MPI v4.1.6"  # a second Open MPI
    df = pd.concat([summary, pd.DataFrame([extra, extra_auto])], ignore_index=True)
    t = xl.table(df)
    mpich = t[(t["library"] == "mpich") & (t["procs"] == 2) & (t["size"] == 64 * KIB)]
    assert len(mpich) == 1 and mpich.iloc[0]["best_algorithm"] == "native:ring"
    assert set(t.loc[t["library"] == "openmpi", "library_version"]) == {
        "Open MPI v5.0.8", "Open MPI v4.1.6"}
    path = tmp_path / "summary.csv"
    df.to_csv(path, index=False)
    written = xl.make(Inputs.of(path, tmp_path / "tables", tmp_path / "fig"))
    assert len(written) == 8 and all(p.stat().st_size > 0 for p in written)
