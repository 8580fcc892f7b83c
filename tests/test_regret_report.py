"""``harness tune regret <c>`` (harness/report/regret.py, harness/cli/tune.py) on the synthetic
exhaustive campaign of tests/test_regret.py, cut down (3 P x 8 sizes x 4 algorithms for MPICH,
a smaller Intel MPI copy with autotuner cells) and replayed with a small forest: pure Python,
no MPI."""

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis import regret
from harness.cli import main
from harness.report import regret as report
from harness.report import tuning_compare
from harness.results.store import SUMMARY_COLUMNS
from test_regret import SIZES, synthetic
from test_report import row

TREES = 8
LIBS = ("impi", "mpich")


def small_summary() -> pd.DataFrame:
    """MPICH: P in {2, 6, 16}, every third size (96 cells); Intel MPI: P in {2, 16}, every
    sixth size (32 cells), plus the autotuner at two of its points, 10 % above BEST there."""
    s = synthetic()
    mpich = s[s["procs"].isin([2, 6, 16]) & s["size"].isin(SIZES[::3])]
    impi = s[s["procs"].isin([2, 16]) & s["size"].isin(SIZES[::6])].assign(
        library="impi", library_version="Intel(R) MPI Library 2021.18.1")
    impi = impi.assign(cell_id=impi["cell_id"].str.replace("mpich", "impi"))
    best = impi.groupby(["procs", "size"])["mean"].min()
    tuner = [row("impi", "native:autotuner", size, 1.1 * best[(p, size)], procs=p, warmup=250)
             for p, size in [(2, SIZES[0]), (16, SIZES[-6])]]
    return pd.concat([mpich, impi, pd.DataFrame(tuner, columns=SUMMARY_COLUMNS)],
                     ignore_index=True)


@pytest.fixture
def roots(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("HARNESS_FIGURES", str(tmp_path / "figures"))
    return tmp_path / "results", tmp_path / "figures"


def store(root, summary: pd.DataFrame, campaign: str = "truth"):
    (root / campaign).mkdir(parents=True, exist_ok=True)
    summary.to_csv(root / campaign / "summary.csv", index=False)


def test_regret_writes_the_table_the_curves_the_generalisation_and_a_figure_per_library(
        roots, capsys):
    results, figures = roots
    summary = small_summary()
    summary["shared_cpu"] = [k in (3, 40, 41) for k in range(len(summary))]
    store(results, summary)
    assert main(["tune", "regret", "truth", "--seeds", "2", "--batch", "12",
                 "--trees", str(TREES)]) == 0
    out = capsys.readouterr().out
    assert f"truth: 3 of {len(summary)} cells ran with two ranks on one CPU" in out
    tables = results / "truth" / "tables"
    for name in ("regret.md", "regret.csv", "regret.tex", "regret_curve.csv",
                 "regret_generalisation.md", "regret_generalisation.csv"):
        assert (tables / name).is_file() and str(tables / name) in out, name
    for lib in LIBS:
        for ext in ("png", "pdf"):
            assert (figures / "truth" / f"regret_{lib}.{ext}").stat().st_size > 0
    assert not (results / "truth" / "tuning").exists()  # --regret writes no tuning file

    table = pd.read_csv(tables / "regret.csv")
    assert list(table.columns) == report.TABLE_COLUMNS
    policies = table.groupby("library")["policy"].apply(list).to_dict()
    assert policies == {"impi": ["adaptive", "grid", "random", report.AUTOTUNER_LABEL],
                        "mpich": ["adaptive", "grid", "random"]}
    mp = table[table["library"] == "mpich"].set_index("policy")
    assert (mp["exhaustive_cells"] == 96).all()
    assert mp.loc["adaptive", "seeds"] == 2 and mp.loc["grid", "seeds"] == 1
    # every replay measures everything in the end, so each reaches 5 % within the budget
    assert (mp["reached"] == mp["seeds"]).all() and (mp["cells_5pct"] <= 96).all()
    assert mp["cells_ratio"].tolist() == pytest.approx((mp["cells_5pct"] / 96).tolist())
    assert 0 < mp.loc["adaptive", "stop_cells"] <= 96  # the stopping rule fired somewhere
    tuner = table[table["policy"] == report.AUTOTUNER_LABEL].iloc[0]
    assert tuner["points"] == 2 and tuner["calls"] == 2 * (250 + 10)
    assert tuner["mean_regret"] == pytest.approx(0.1) and tuner["worst_regret"] == pytest.approx(0.1)
    md = (tables / "regret.md").read_text()
    assert "| MPICH | adaptive | 2 (2) |" in md and "520 calls, 2 points" in md
    assert "Surrogate: random forest." in md  # the default model, named

    curves = pd.read_csv(tables / "regret_curve.csv")
    assert list(curves.columns) == report.CURVE_COLUMNS
    for (lib, policy, seed), c in curves.groupby(["library", "policy", "seed"]):
        assert c["cells"].iloc[-1] == (96 if lib == "mpich" else 32)
        assert c["mean_regret"].iloc[-1] == 0 and (np.diff(c["cells"]) > 0).all()
        assert policy in regret.POLICIES and seed < (2 if policy != "grid" else 1)

    general = pd.read_csv(tables / "regret_generalisation.csv")
    assert list(general.columns) == report.GENERALISATION_COLUMNS
    held = general.groupby("library")["value"].apply(list).to_dict()
    assert held == {"impi": [2, 16], "mpich": [2, 6, 16]}
    assert (general["held_out"] == "P").all() and (general["points"] == 8).sum() == 3
    assert (general.loc[general["library"] == "mpich", "trained_cells"] == 64).all()
    assert np.isfinite(general["mean_regret"]).all()


def test_judge_times_every_choice_in_another_campaign(roots, capsys):
    """--judge: the same replays, their choices timed in a second campaign of the same cells
    (other noise): tables/regret_judged with the exhaustive campaign's own regret there."""
    results, figures = roots
    store(results, small_summary())
    other = small_summary()
    other["mean"] = other["mean"] * np.exp(0.2 * np.random.default_rng(5).standard_normal(len(other)))
    store(results, other, "again")
    assert main(["tune", "regret", "truth", "--judge", "again", "--seeds", "2", "--batch",
                 "12", "--trees", str(TREES)]) == 0
    out = capsys.readouterr().out
    tables = results / "truth" / "tables"
    assert str(tables / "regret_judged.md") in out
    judged = pd.read_csv(tables / "regret_judged.csv")
    assert list(judged.columns) == report.JUDGED_COLUMNS
    assert (judged["judge"] == "again").all()
    for lib, cells in (("mpich", 96), ("impi", 32)):
        rows = judged[judged["library"] == lib].set_index(["policy", "share"])
        floor = rows.loc[("exhaustive", 1.0)]
        truth, again = (regret.truth(s, lib) for s in (small_summary(), other))
        assert floor["judged_regret"] == pytest.approx(
            regret.exhaustive_judged(truth, again)["judged_regret"])
        assert floor["judged_regret"] >= 0 and floor["judged_cost"] == 0
        assert floor["judged_regret"] > 0 or lib == "impi"  # the noise moved some BEST
        assert floor["cells"] == cells and floor["points"] == cells // 4
        quarter = rows.loc[("adaptive", 0.25)]
        assert quarter["seeds"] == 2 and quarter["cells"] >= 0.25 * cells
        assert quarter["judged_regret_low"] <= quarter["judged_regret"] <= quarter["judged_regret_high"]
    curves = pd.read_csv(tables / "regret_curve.csv")
    assert curves[["judged_regret", "judged_cost"]].notna().all().all()
    last = curves.groupby(["library", "policy", "seed"]).tail(1)  # everything measured
    assert (last["judged_cost"] == 0).all()
    assert "| MPICH | exhaustive | 96 (100.0 %) |" in (tables / "regret_judged.md").read_text()
    assert (figures / "truth" / "regret_mpich.png").stat().st_size > 0
    for argv, says in ((["--judge", "truth"], "argument --judge: got 'truth', the campaign itself"),
                       (["--judge", "nope"], "argument --judge: campaign 'nope' has no results")):
        with pytest.raises(SystemExit, match=r"^2$"):
            main(["tune", "regret", "truth", *argv])
        assert says in capsys.readouterr().err


def test_several_judges_are_pooled(roots, capsys):
    results, _ = roots
    store(results, small_summary())
    others = []
    for k, name in enumerate(("again", "later")):
        other = small_summary()
        other["mean"] = other["mean"] * np.exp(0.2 * np.random.default_rng(k).standard_normal(len(other)))
        store(results, other, name)
        others.append(other)
    assert main(["tune", "regret", "truth", "--judge", "again", "--judge", "later", "--seeds",
                 "1", "--batch", "48", "--trees", str(TREES), "--surrogate", "gp"]) == 0
    judged = pd.read_csv(results / "truth" / "tables" / "regret_judged.csv")
    assert (judged["judge"] == "again+later").all()
    floor = judged.set_index(["library", "policy", "share"]).loc[("mpich", "exhaustive", 1.0)]
    pool = regret.pooled([regret.truth(o, "mpich") for o in others])
    assert floor["judged_regret"] == pytest.approx(
        regret.exhaustive_judged(regret.truth(small_summary(), "mpich"), pool)["judged_regret"])
    tables = results / "truth" / "tables"
    assert "again+later" in (tables / "regret_judged.md").read_text()
    for name in ("regret.md", "regret_judged.md", "regret_generalisation.md"):
        assert "Surrogate: Gaussian process." in (tables / name).read_text(), name

def test_table_rows_take_the_median_over_seeds_and_the_first_firing_of_the_stop_rule():
    table = regret.truth(small_summary(), "impi")  # 32 cells
    curve = pd.DataFrame({
        "library": "impi", "policy": "adaptive", "seed": [0, 0, 0, 1, 1, 1],
        "batch": [1, 2, 3] * 2, "cells": [8, 16, 32] * 2,
        "machine_time": [1.0, 2.0, 4.0, 1.5, 2.5, 4.0],
        "mean_regret": [0.3, 0.04, 0.0, 0.2, 0.1, 0.0],
        "worst_regret": [1.0, 0.5, 0.0, 0.9, 0.4, 0.0],
        "predicted_regret": 0.01, "predicted_regret_q95": [0.2, 0.04, 0.0, 0.01, 0.02, 0.0]})
    (got,) = report.table_rows(curve, table, "impi")
    assert got["cells_5pct"] == 24 and (got["cells_5pct_low"], got["cells_5pct_high"]) == (16, 32)
    assert got["time_5pct"] == 3.0 and got["reached"] == 2 and got["seeds"] == 2
    assert got["exhaustive_cells"] == 32 and got["cells_ratio"] == 24 / 32
    # the rule holds two batches in a row at 32 cells for seed 0, at 16 for seed 1: the median
    assert got["stop_cells"] == 24 and got["stop_mean_regret"] == pytest.approx(0.05)
    never = curve.assign(mean_regret=0.5, predicted_regret_q95=0.5)
    (row_,) = report.table_rows(never, table, "impi")
    assert row_["reached"] == 0 and math.isinf(row_["cells_5pct"]) and "stop_cells" not in row_
    assert report.display(pd.DataFrame([row_]).reindex(columns=report.TABLE_COLUMNS))[
        "cells to 5 %"].iloc[0] == "not reached"


def test_one_p_and_one_node_count_leave_nothing_to_hold_out():
    table = regret.truth(small_summary(), "impi")
    rows = report.leave_one_out(table[table["procs"] == 2], "impi", trees=TREES)
    assert rows == [{"library": "impi", "held_out": "", "points": 0,
                     "note": "one P and one node count: nothing to hold out"}]


def test_bad_input_names_the_argument_the_value_and_what_was_expected(roots, capsys):
    results, _ = roots
    store(results, small_summary(), "other")

    def error(*argv):
        with pytest.raises(SystemExit, match=r"^2$") as exc:
            main(["tune", *argv])
        assert exc.value.code == 2
        return capsys.readouterr().err.strip()

    err = error("regret", "nope")
    assert err.startswith("harness tune regret: error: argument campaign: campaign 'nope' has no "
                          "results") and "campaigns with results: other" in err
    one = small_summary()
    one = one[(one["library"] == "mpich") & (one["algorithm"] == "native:ring")]
    store(results, one, "single")
    assert error("regret", "single") == (
        "harness tune regret: error: argument campaign: single: library: 'mpich' has 1 timed "
        "native algorithm(s) in the summary, expected at least 2 to choose between")
    store(results, one.assign(status="failed"), "failed")
    assert "no library has timed native:* cells" in error("regret", "failed")
    assert error("regret", "other", "--seeds", "0").endswith(
        "argument --seeds: expected an integer >= 1, got 0")
    assert error("regret", "other", "--batch", "x").endswith(
        "argument --batch: expected an integer, got 'x'")
    assert "unrecognized arguments: --verify" in error("regret", "other", "--verify")
    # the flags that chose a command before each had its own name it
    for flag, command in (("--regret", "regret CAMPAIGN"), ("--verify", "verify CAMPAIGN"),
                          ("--adaptive", "adaptive CAMPAIGN"), ("--compare", "compare CAMPAIGN TRUTH")):
        assert error("other", flag) == (
            f"harness tune files: error: argument {flag}: replaced by the command `harness tune "
            f"{command}` (harness tune {command.split()[0]} --help)")


def test_the_stopping_point_is_where_the_rule_held_two_batches_in_a_row():
    curve = pd.DataFrame({"predicted_regret_q95": [0.2, 0.01, 0.3, 0.04, 0.02, 0.0]})
    assert regret.fired(curve) == 4 and regret.fired(curve, rounds=1) == 1
    assert regret.fired(curve.head(4)) is None


def test_compare_sets_two_tunings_side_by_side_at_the_truths_points(roots, capsys):
    import json

    from harness.tuning import Rule, Table

    results, _ = roots
    summary = small_summary()
    store(results, summary)
    table = regret.truth(summary, "mpich")
    best = table.drop_duplicates(regret.POINT)
    # the truth's file: BEST everywhere at P = 2; the other: ring at every size of P = 2
    rules = [Rule(2, 2, int(s), int(s) + 1, a.split(":", 1)[1])
             for s, a in best[best["procs"] == 2][["size", "best_algorithm"]].itertuples(index=False)]
    for campaign, tab in (("truth", Table("mpich", tuple(rules))),
                          ("ad", Table("mpich", (Rule(2, 2, 1, None, "ring"),)))):
        (results / campaign / "tuning").mkdir(parents=True, exist_ok=True)
        (results / campaign / "tuning" / "mpich.json").write_text(
            json.dumps({"table": tab.to_dict()}))
    assert main(["tune", "compare", "ad", "truth"]) == 0
    out = capsys.readouterr().out
    got = pd.read_csv(results / "ad" / "tables" / "tuning_vs_truth.csv")
    assert list(got.columns) == tuning_compare.COMPARE_COLUMNS and len(got) == 24  # the truth's points
    p2 = got[got["procs"] == 2]
    assert (p2["exhaustive_regret"] == 0).all() and (p2["other"] == "native:ring").all()
    ring_best = p2["exhaustive"] == "native:ring"
    assert p2["same"].tolist() == ring_best.tolist() and p2.loc[ring_best, "cost"].isna().all()
    assert (p2.loc[~ring_best, "cost"] > 0).all()
    assert (got.loc[got["procs"] != 2, ["exhaustive", "other"]] == "native:auto").all().all()
    assert f"mpich: the same algorithm at {int(got['same'].sum())} of 24 points" in out
    with pytest.raises(SystemExit, match=r"^2$"):
        main(["tune", "compare", "truth", "nope"])
    assert "argument truth: campaign 'nope' has no results" in capsys.readouterr().err


def test_campaign_noise_is_how_far_apart_two_campaigns_time_the_same_cells():
    truth = pd.DataFrame({"library": ["mpich"] * 4 + ["impi"], "cell_id": ["a", "b", "c", "d", "e"],
                          "status": ["ok", "ok", "not-converged", "failed", "ok"],
                          "mean": [1.0, 2.0, 4.0, 1.0, 1.0]})
    other = pd.DataFrame({"library": ["mpich"] * 4, "cell_id": ["a", "b", "c", "d"],
                          "status": ["ok", "ok", "ok", "ok"], "mean": [1.1, 1.0, 4.0, 9.0]})
    got = tuning_compare.campaign_noise(truth, other)
    assert list(got.columns) == tuning_compare.NOISE_COLUMNS
    (row,) = got.itertuples(index=False)  # impi: no cell in both; d: failed in the truth
    assert (row.library, row.cells) == ("mpich", 3)
    assert row.median_change == pytest.approx(0.1)  # |1.1/1 - 1|, |1/2 - 1|, |4/4 - 1|
    assert row.p90_change == pytest.approx(0.5 - 0.2 * 0.4)  # between 0.1 and 0.5
    assert tuning_compare.campaign_noise(truth, other.iloc[:0]).empty


def test_the_statistic_defaults_to_the_report_statistic_of_the_configfile(tmp_path):
    import argparse

    from harness.cli import tune as tune_cli

    from conftest import REPO

    shipped = str(REPO / "config" / "tuning-truth.yaml")
    text = open(shipped).read()
    median = tmp_path / "median.yaml"
    median.write_text(text + "\nreport:\n  statistic: median\n")
    parser = argparse.ArgumentParser()
    for given, configfile, want in ((None, None, "mean"), (None, str(median), "median"),
                                    ("mean", str(median), "mean"),
                                    (None, shipped, "mean")):
        args = argparse.Namespace(statistic=given, configfile=configfile)
        assert tune_cli.statistic(args, parser) == want, (given, configfile)


def test_a_truth_pooled_from_several_campaigns(roots, capsys):
    results, _ = roots
    base = small_summary()
    store(results, base)
    noisy = {}
    for k, name in enumerate(("again", "later")):
        other = small_summary()
        other["mean"] = other["mean"] * np.exp(0.3 * np.random.default_rng(10 + k).standard_normal(len(other)))
        store(results, other, name)
        noisy[name] = other
    assert main(["tune", "regret", "truth", "--pool", "again", "--judge", "later", "--seeds",
                 "1", "--batch", "48", "--trees", str(TREES)]) == 0
    tables = results / "truth" / "tables"
    assert "Truth: truth+again, pooled" in (tables / "regret.md").read_text()
    judged = pd.read_csv(tables / "regret_judged.csv").set_index(["library", "policy", "share"])
    truth = regret.pooled([regret.truth(base, "mpich"), regret.truth(noisy["again"], "mpich")])
    floor = judged.loc[("mpich", "exhaustive", 1.0)]
    assert floor["judged_regret"] == pytest.approx(
        regret.exhaustive_judged(truth, regret.truth(noisy["later"], "mpich"))["judged_regret"])
    curves = pd.read_csv(tables / "regret_curve.csv")
    assert (curves.groupby(["library", "policy", "seed"])["mean_regret"].last() == 0).all()
    for argv, says in ((["--pool", "truth"], "argument --pool: got 'truth', the campaign itself"),
                       (["--pool", "later", "--judge", "later"], "got 'later', also a judge"),
                       (["--pool", "nope"], "argument --pool: campaign 'nope' has no results")):
        with pytest.raises(SystemExit, match=r"^2$"):
            main(["tune", "regret", "truth", *argv])
        assert says in capsys.readouterr().err


def test_a_simulated_truth_is_labelled_simulated(roots, capsys):
    """Libraries named <family>@<platform> (SMPI's copies on a simulated platform) replay as
    any other; the tables, captions and figure titles say the truth is simulated."""
    results, figures = roots
    s = synthetic()
    s = s[s["procs"].isin([2, 16]) & s["size"].isin(SIZES[::6])]
    s = s.assign(library="mpich@flat", library_version="MPICH 3.3b (SMPI's copy of its selection)",
                 cell_id=s["cell_id"].str.replace("mpich", "mpichflat"), simulated=True,
                 platform="0538789ab5bf", simulator="SimGrid 3.32")
    store(results, s)
    assert main(["tune", "regret", "truth", "--seeds", "1", "--batch", "8",
                 "--trees", str(TREES)]) == 0
    tables = results / "truth" / "tables"
    assert pd.read_csv(tables / "regret.csv")["library"].unique().tolist() == ["mpich@flat"]
    md = (tables / "regret.md").read_text()
    assert "mpich@flat (simulated MPICH 3.3b)" in md
    assert "Truth simulated (SimGrid 3.32) on platform(s) flat" in md
    assert "mpich@flat (simulated MPICH 3.3b)" in (tables / "regret_generalisation.md").read_text()
    assert (figures / "truth" / "regret_mpich@flat.png").stat().st_size > 0
