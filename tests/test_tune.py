"""`harness tune`: decision tables from a campaign's summary (no MPI here; the libraries'
files are tested in tests/test_tuning_<library>.py, the whole stage in test_tune_workflow)."""

import json

import pandas as pd
import pytest
from conftest import harness

from harness.campaign import tune
from harness.results import store as results
from harness.tuning import Rule, Table


def row(alg, size, mean, hw, library="mpich", procs=2, status="ok", dtype="float64", **kw):
    r = {c: None for c in results.SUMMARY_COLUMNS}
    r.update(campaign="t", cell_id=f"c{library}{alg}{procs}{size}{dtype}", library=library,
             library_version="x", algorithm=f"native:{alg}", procs=procs, nodes=1, size=size,
             count=size // 8, dtype=dtype, op="sum", delay="none", max_delay=0.0, late_rank=1,
             params="{}", thread_level="single", timing="percall", oversubscribed=False,
             metric="mean", n=50, mean=mean, ci_low=mean - hw, ci_high=mean + hw,
             status=status, converged=status == "ok")
    r.update(kw)
    return r


def summary(tmp_path, rows, campaign="t"):
    d = tmp_path / campaign
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(d / "summary.csv", index=False)
    return tmp_path


SIZES = [4096, 65536, 1 << 20, 4 << 20]


def four_sizes():
    rows = []
    for s, (auto, ring, rd) in zip(SIZES, [(10, 9.9, 12), (50, 30, 60), (300, 200, 400),
                                           (900, 950, 1200)]):
        rows += [row("auto", s, auto * 1e-6, 1e-7), row("ring", s, ring * 1e-6, 1e-7),
                 row("recursive_doubling", s, rd * 1e-6, 1e-7)]
    return rows


def test_significant_winners_merge_into_one_range_with_geometric_boundaries(tmp_path):
    root = summary(tmp_path, four_sizes())
    ev, conds = tune.evidence(tune.load(root, "t"), root / "t")
    assert conds["mpich"]["dtype"] == "float64"
    table, rows = tune.build(ev, "mpich")
    # 4 KiB: a tie (CIs overlap), 64 KiB and 1 MiB: ring, 4 MiB: AUTO is BEST
    assert table.rules == (Rule(2, 2, 16384, 2 << 20, "ring"),)
    assert list(rows.algorithm) == ["", "ring", "ring", ""]
    assert rows.reason.iloc[0] == "AUTO kept: no significant gap"
    assert table.lookup(2, 16384) == "ring" and table.lookup(2, 16383) is None
    assert table.lookup(3, 65536) is None  # no extrapolation beyond the measured P


def test_confirmation_overrules_the_campaign(tmp_path):
    root = summary(tmp_path, four_sizes())
    (root / "t" / "confirm").mkdir()
    (root / "t" / "confirm" / "mpich-p2-n1-single.json").write_text(json.dumps({"entries": [
        {"library": "mpich", "procs": 2, "size": 65536, "dtype": "float64", "op": "sum",
         "best": "native:ring", "gain": 1.01, "gain_ci_low": 0.97, "gain_ci_high": 1.05,
         "verdict": "tie"}]}))
    ev, _ = tune.evidence(tune.load(root, "t"), root / "t")
    table, rows = tune.build(ev, "mpich")
    assert rows.set_index("size").loc[65536, "source"] == "confirmation"
    assert table.rules == (Rule(2, 2, 262144, 2 << 20, "ring"),)


def test_oversubscribed_points_keep_auto(tmp_path):
    rows = [dict(r, oversubscribed=True) for r in four_sizes()]
    root = summary(tmp_path, rows)
    table, out = tune.build(tune.evidence(tune.load(root, "t"), root / "t")[0], "mpich")
    assert table.rules == () and set(out.reason) == {"AUTO kept: oversubscribed, no claim"}


def test_p_ranges_merge_and_the_catalogue_condition_is_respected(tmp_path):
    rows = []
    for p in (2, 4, 8):
        rows += [row("auto", 65536, 50e-6, 1e-7, procs=p), row("ring", 65536, 30e-6, 1e-7, procs=p),
                 row("auto", 1 << 20, 300e-6, 1e-7, procs=p),
                 row("ring", 1 << 20, 200e-6, 1e-7, procs=p)]
    # Open MPI's rabenseifner needs count >= pof2: at 8 B (one double at most) it cannot be
    # assigned a range whose smallest call has fewer elements than P's power of two
    rows += [row("auto", 8, 5e-6, 1e-8, library="openmpi", procs=4, dtype="float32"),
             row("rabenseifner", 8, 3e-6, 1e-8, library="openmpi", procs=4, dtype="float32"),
             row("auto", 4096, 9e-6, 1e-8, library="openmpi", procs=4, dtype="float32"),
             row("rabenseifner", 4096, 7e-6, 1e-8, library="openmpi", procs=4, dtype="float32")]
    root = summary(tmp_path, rows)
    ev, _ = tune.evidence(tune.load(root, "t"), root / "t")
    table, _ = tune.build(ev, "mpich")
    # P boundaries at the geometric midpoints: 2 | 3..5 | 6..8, all the same rules -> one range
    assert table.rules == (Rule(2, 8, 65536, (1 << 20) + 1, "ring"),)
    assert table.lookup(5, 70000) == "ring"
    ev_o = ev[ev.library == "openmpi"]
    table_o, rows_o = tune.build(ev_o, "openmpi")
    assert rows_o.set_index("size").loc[8, "algorithm"] == ""
    assert "condition fails" in rows_o.set_index("size").loc[8, "reason"]
    assert table_o.rules == (Rule(4, 4, 182, 4097, "rabenseifner"),)  # from sqrt(8 * 4096)


@pytest.mark.parametrize("case,message", [
    ("none", "has no native cells"),
    ("single", "library mpich has a single native algorithm"),
    ("unconverged", "no converged native cell"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, case, message):
    rows = {"none": [dict(row("auto", 8, 1e-6, 1e-8), algorithm="ring")],
            "single": [row("auto", 8, 1e-6, 1e-8), row("auto", 64, 1e-6, 1e-8)],
            "unconverged": [row("auto", 8, 1e-6, 1e-8, status="not-converged"),
                            row("ring", 8, 1e-6, 1e-8, status="not-converged")]}[case]
    root = summary(tmp_path / "results", rows)
    monkeypatch.setenv("HARNESS_RESULTS", str(root))
    out = harness("tune", "files", "t")
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (root / "t" / "tuning").exists()


def test_unknown_campaign_lists_the_campaigns_there(tmp_path, monkeypatch):
    root = summary(tmp_path / "results", four_sizes(), campaign="mine")
    monkeypatch.setenv("HARNESS_RESULTS", str(root))
    out = harness("tune", "nope")  # short for `harness tune files nope`
    assert out.returncode == 2 and "campaigns with results: mine" in out.stderr, out.stderr


def test_table_round_trips_and_looks_up():
    t = Table("impi", (Rule(2, 4, 0, 4096, "ring"), Rule(2, 4, 4096, None, "nreduce")))
    assert Table.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    assert t.lookup(3, 10**9) == "nreduce" and t.lookup(5, 8) is None


def test_intel_mpi_gaps_are_filled_or_no_rule_is_written(tmp_path):
    """Intel MPI's file cannot keep the default around a rule (it runs preset 0 there): each
    measured point without a rule gets its fastest forced algorithm when that one is not
    slower than AUTO beyond noise; if one is, no rule is written at all."""
    def rows(slow_fill):
        return [row("auto", 4096, 2e-6, 1e-8, library="impi"),
                row("ring", 4096, (2.5e-6 if slow_fill else 2.0e-6), 1e-8, library="impi"),
                row("auto", 65536, 9e-6, 1e-8, library="impi"),
                row("nreduce", 65536, 6e-6, 1e-8, library="impi"),
                row("ring", 65536, 7e-6, 1e-8, library="impi")]
    root = summary(tmp_path / "a", rows(False))
    table, out = tune.build(tune.evidence(tune.load(root, "t"), root / "t")[0], "impi")
    assert table.rules == (Rule(2, 2, 4096, 16384, "ring"), Rule(2, 2, 16384, 65537, "nreduce"))
    assert "fills a gap" in out.set_index("size").loc[4096, "reason"]
    root = summary(tmp_path / "b", rows(True))
    table, out = tune.build(tune.evidence(tune.load(root, "t"), root / "t")[0], "impi")
    assert table.rules == () and out.reason.str.startswith("AUTO kept everywhere").all()
    assert "native:ring at P=2 4096 B" in out.reason.iloc[0]


def test_a_held_out_loss_cuts_the_rule_at_the_geometric_midpoint():
    t = Table("mpich", (Rule(2, 2, 262144, (1 << 20) + 1, "recursive_multiplying"),
                        Rule(2, 2, 8, 64, "ring")))
    cut = tune.exclude(t, [(2, 262144)], {2: [8, 4096, 65536, 1 << 20]})
    assert cut.rules == (Rule(2, 2, 524288, (1 << 20) + 1, "recursive_multiplying"),
                         Rule(2, 2, 8, 64, "ring"))
    both = tune.exclude(Table("x", (Rule(2, 2, 0, None, "ring"),)), [(2, 1000)], {2: [10, 100000]})
    assert both.rules == (Rule(2, 2, 0, 100, "ring"), Rule(2, 2, 10000, None, "ring"))


def test_cuts_of_an_earlier_verification_are_kept(tmp_path):
    root = summary(tmp_path, four_sizes())
    (root / "t" / "tuning").mkdir(parents=True)
    (root / "t" / "tuning" / "verify-mpich.json").write_text(json.dumps(
        {"refined": [{"procs": 2, "size": 200000}]}))
    docs = tune.tune(root, "t", log=lambda *a: None)
    rules = [Rule(**r) for r in docs["mpich"]["table"]["rules"]]
    assert rules == [Rule(2, 2, 16384, 114487, "ring"), Rule(2, 2, 457947, 2 << 20, "ring")]
    assert (root / "t" / "tuning" / "mpich" / "mpich-coll-selection.json").is_file()
