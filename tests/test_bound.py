"""The lower bound (Chan et al. 2007) by hand values, the link each cell's bound takes, and
the AUTO-vs-BEST table's fraction of it."""

import math

import pandas as pd
import pytest

from harness.analysis.bound import add_bounds, chan, link

DOC = {"gamma": 2e-10, "pingpong": {
    "openmpi": {"alpha": 5e-6, "beta": 1e-9, "level": "network", "gamma": 1e-10,
                "levels": {"network": {"alpha": 5e-6, "beta": 1e-9},
                           "node": {"alpha": 1e-6, "beta": 2e-10}}},
    "mpich": {"alpha": 3e-6, "beta": 5e-10, "level": "socket", "gamma": None}}}


def test_the_bound_by_hand():
    # P=4, 1 MiB: 2 alpha + 2 * 3/4 * n * beta + 3/4 * n * gamma
    n = 2**20
    assert chan(4, n, 1e-6, 1e-9, 1e-10) == pytest.approx(2e-6 + 1.5 * n * 1e-9 + 0.75 * n * 1e-10)
    # P=3 (not a power of two): ceil(log2 3) = 2 rounds, (P-1)/P = 2/3
    assert chan(3, 1200, 1e-6, 1e-9, 0.0) == pytest.approx(2e-6 + 2 * 800 * 1e-9)
    # P=5: 3 rounds
    assert chan(5, 0, 1e-6, 1e-9, 1e-10) == pytest.approx(3e-6)
    assert chan(1, 2**20, 1e-6, 1e-9, 1e-10) == 0.0


def test_the_link_is_the_level_the_ranks_share():
    assert link(DOC, "openmpi", 2) == {"alpha": 5e-6, "beta": 1e-9, "gamma": 1e-10, "level": "network"}
    assert link(DOC, "openmpi", 1)["level"] == "node" and link(DOC, "openmpi", 1)["beta"] == 2e-10
    # measured at one level only: that level, with the campaign's gamma
    assert link(DOC, "mpich", 1) == {"alpha": 3e-6, "beta": 5e-10, "gamma": 2e-10, "level": "socket"}
    assert link(DOC, "impi", 1) is None


def test_each_cell_gets_its_bound_and_ratio():
    rows = pd.DataFrame({"library": ["openmpi", "openmpi", "impi"], "procs": [2, 4, 2],
                         "nodes": [1, 2, 1], "size": [1000, 2**20, 8], "mean": [1e-5, 1e-2, 1e-6]})
    out = add_bounds(rows, DOC)
    b0 = 1e-6 + 2 * 500 * 2e-10 + 500 * 1e-10
    assert out["bound"][0] == pytest.approx(b0) and out["bound_ratio"][0] == pytest.approx(1e-5 / b0)
    b1 = chan(4, 2**20, 5e-6, 1e-9, 1e-10)
    assert out["bound_ratio"][1] == pytest.approx(1e-2 / b1) and list(out["bound_level"]) == ["node", "network", ""]
    assert math.isnan(out["bound"][2]) and math.isnan(out["bound_ratio"][2])


def test_the_auto_vs_best_table_says_how_much_of_the_bound_each_reaches(tmp_path):
    from harness.report.figures import of_bound
    from harness.report.tables import auto_vs_best, display

    rows = []
    for alg, mean in (("native:auto", 4e-4), ("native:ring", 2e-4)):
        rows.append({"campaign": "b", "cell_id": alg, "run_id": "r", "library": "openmpi",
                     "library_version": "Open MPI v5.0.11", "algorithm": alg, "procs": 2,
                     "nodes": 1, "size": 2**16, "dtype": "float64", "op": "sum", "delay": "none",
                     "max_delay": 0, "late_rank": 0, "metric": "mean", "n": 50, "mean": mean,
                     "ci_low": mean * 0.99, "ci_high": mean * 1.01, "status": "ok",
                     "converged": True, "oversubscribed": False})
    table = of_bound(auto_vs_best(pd.DataFrame(rows)), DOC)
    bound = chan(2, 2**16, 1e-6, 2e-10, 1e-10)
    assert table["auto_of_bound"][0] == pytest.approx(bound / 4e-4)
    assert table["best_of_bound"][0] == pytest.approx(bound / 2e-4)
    header, cells = display(table)
    i = header.index("AUTO of bound")
    assert header[i + 1] == "BEST of bound"
    assert cells[0][i]["text"] == f"{100 * bound / 4e-4:.2g}%"


def test_what_auto_ran_is_labelled_even_outside_the_catalogue():
    from harness.results.auto_ran import label

    assert label({"status": "identified", "ran": ["ring"], "functions": []}) == "ring"
    # Intel MPI's AUTO at P=4, 2-4 KiB: an allreduce of its own that no id forces here
    assert label({"status": "unidentified", "functions": [
        ["MPIR_Allreduce_intra_auto", 1], ["MPIR_Allreduce_intra_rec_multiplying", 1]]}) == \
        "rec_multiplying (not forcible)"
    assert label({"status": "unverifiable", "why": "gdb is not installed"}) == \
        "unverifiable: gdb is not installed"


def test_the_bound_table_counts_the_sizes_below_the_bound(tmp_path):
    """A time under the bound says the fit overstates the link: counted, never hidden."""
    import json

    from harness.report import bound
    from harness.report.inputs import Inputs

    rows = [{"campaign": "b", "cell_id": f"c{i}", "run_id": "r", "library": "openmpi",
             "library_version": "Open MPI v5.0.11", "algorithm": "native:ring", "procs": 2,
             "nodes": 1, "size": size, "dtype": "float64", "op": "sum", "delay": "none",
             "max_delay": 0, "late_rank": 0, "metric": "mean", "n": 50, "mean": mean,
             "ci_low": mean, "ci_high": mean, "status": "ok", "converged": True,
             "oversubscribed": False, "params": "{}"}
            for i, (size, mean) in enumerate(((8, 1e-7), (2**20, 1.0)))]
    pd.DataFrame(rows).to_csv(tmp_path / "summary.csv", index=False)
    (tmp_path / "p.json").write_text(json.dumps(DOC))
    bound.make(Inputs.of(tmp_path / "summary.csv", tmp_path / "t", tmp_path / "f",
                         params=tmp_path / "p.json"))
    md = (tmp_path / "t" / "bound.md").read_text()
    assert "| Below the bound | Link |" in md
    assert "| Open MPI 5.0.11 | 2 | 1 | ring | 2 |" in md and "| 1 | node |" in md
    csv = pd.read_csv(tmp_path / "t" / "bound.csv")
    assert (csv["bound_ratio"] < 1).sum() == 1 and (csv["bound_ratio"] > 1).sum() == 1
