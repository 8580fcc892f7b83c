"""The performance-guideline mock-ups (harness/algorithms/guidelines.py): Reduce + Bcast,
Reduce_scatter + Allgatherv, two Allreduces of half the vector, each composed of the library's
own collectives. Correct on every library at P = 1..7 under MPICH (primes, non-powers of two)
and several P under Open MPI and Intel MPI, every dtype, op and count of
tests/mpi_check_algorithms.py (counts 0, 1, P-1, P+1, 7, 1000, 4099: not divisible by P); and
through the bench, where a cell of one is measured and verified like any algorithm."""

import pytest
from conftest import execute_run
from mpi_check_support import check_algorithms

from harness.algorithms import REGISTRY
from harness.cells import Cell

NAMES = {"reduce_bcast", "reduce_scatter_allgather", "allreduce_halves"}


def test_the_family_is_registered():
    assert {n for n, a in REGISTRY.items() if a.family == "guidelines"} == NAMES
    assert all("guideline mock-up" in REGISTRY[n].description for n in NAMES)


# Intel MPI at P = 5 (oversubscribed, 2 cores): reduce_bcast gave wrong int32 results at
# elements 4096..4098 of 4099 on ranks 3 and 4. The fault is Intel MPI's MPI_Bcast alone: its
# SHM-based algorithms 9-11 (which AUTO picks there) left stale data on some ranks in a plain
# mpi4py loop too (docs/troubleshooting.md); the bench records such a cell `wrong`, never
# timed. P = 4 is checked here.
@pytest.mark.parametrize("library,procs,sweep", [("mpich", 7, "1-7"), ("openmpi", 5, "2,3,5"),
                                                  ("impi", 4, "2,3,4")])
def test_mock_ups_are_correct(library, procs, sweep):
    assert check_algorithms(library, procs, "guidelines", sweep=sweep) > 0


def test_a_mock_up_is_measured_and_verified_by_the_bench(results_root):
    cells = [Cell("mpich", name, 3, 28, "int32", "max") for name in sorted(NAMES)]
    outcome, doc, _ = execute_run(results_root, "mpich", cells)
    assert outcome == "complete"
    assert [c["status"] for c in doc["cells"]] and all(
        c["status"] in ("ok", "not-converged") for c in doc["cells"]), doc["cells"]


def _row(alg, size, mean, hw, over=False, status="ok", library="mpich"):
    from harness.results.store import SUMMARY_COLUMNS

    r = {c: None for c in SUMMARY_COLUMNS}
    r.update(campaign="g", cell_id=f"{library}{alg}{size}", library=library, algorithm=alg,
             procs=2, nodes=1, size=size, count=size // 8, dtype="float64", op="sum",
             delay="none", max_delay=0.0, late_rank=1, params="{}", thread_level="single",
             timing="percall", oversubscribed=over, n=30, mean=mean, ci_low=mean - hw,
             ci_high=mean + hw, status=status)
    return r


def test_violations_need_intervals_apart_and_enough_cores(tmp_path):
    import pandas as pd

    from harness.analysis.guidelines import comparisons
    from harness.report.guidelines import make
    from harness.report.inputs import Inputs
    from harness.report.registry import REPORTS, Facts

    rows = [_row("native:auto", 65536, 10e-6, 0.2e-6),
            _row("reduce_scatter_allgather", 65536, 7e-6, 0.2e-6),  # faster, CIs apart
            _row("reduce_bcast", 65536, 15e-6, 0.2e-6),  # slower, CIs apart
            _row("allreduce_halves", 65536, 10.1e-6, 0.2e-6),  # CIs overlap
            _row("native:auto", 4096, 5e-6, 0.1e-6, over=True),
            _row("reduce_bcast", 4096, 1e-6, 0.1e-6, over=True),  # faster, but oversubscribed
            _row("native:auto", 1024, 5e-6, 0.1e-6),
            _row("reduce_bcast", 1024, 1e-6, 0.1e-6, status="wrong"),  # never a time
            _row("native:ring", 65536, 1e-6, 0.1e-6)]  # not a mock-up: not compared
    t = comparisons(pd.DataFrame(rows))
    got = {(r.size, r.mock_up): r.verdict for r in t.itertuples()}
    assert got == {(65536, "reduce_scatter_allgather"): "violation",
                   (65536, "reduce_bcast"): "holds", (65536, "allreduce_halves"): "tie",
                   (4096, "reduce_bcast"): "oversubscribed", (1024, "reduce_bcast"): "no data"}
    assert t.set_index(["size", "mock_up"]).loc[(65536, "reduce_scatter_allgather"),
                                                 "speedup"] == pytest.approx(10 / 7)
    csv = tmp_path / "summary.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    written = {str(p) for p in make(Inputs.of(csv, tmp_path / "t", tmp_path / "f"))}
    assert written == set(REPORTS["guidelines"].outputs(str(tmp_path / "t"), str(tmp_path / "f"),
                                                        Facts()))
    md = (tmp_path / "t" / "guidelines.md").read_text()
    assert "1 violation(s)" in md and md.index("violation |") < md.index("holds |")
    # a summary without mock-ups: the declared files, saying there is nothing to compare
    pd.DataFrame(rows[:1]).to_csv(csv, index=False)
    make(Inputs.of(csv, tmp_path / "t2", tmp_path / "f2"))
    assert "no cell with AUTO and a mock-up" in (tmp_path / "t2" / "guidelines.md").read_text()
    assert (tmp_path / "f2" / "guidelines.png").stat().st_size > 0


def test_auto_is_compared_in_the_mock_ups_cache_state_only():
    """The default campaign measures MPICH AUTO at 1 MiB twice, on warm buffers (reuse) and on
    cold ones (rotate: 809 us against 688 us); the mock-ups ran on warm buffers only, so only
    the warm AUTO is their reference, whichever of the two the summary lists last."""
    import pandas as pd

    from harness.analysis.guidelines import comparisons

    def row(alg, mean, buffers):
        return {**_row(alg, 1048576, mean, 1e-6), "buffers": buffers,
                "cell_id": f"{alg}-{buffers}"}

    rows = [row("native:auto", 240e-6, "reuse"), row("reduce_scatter_allgather", 300e-6, "reuse"),
            row("native:auto", 377e-6, "rotate")]
    for order in (rows, rows[::-1]):
        t = comparisons(pd.DataFrame(order))
        assert len(t) == 1 and t.iloc[0]["buffers"] == "reuse"
        assert t.iloc[0]["auto_mean"] == pytest.approx(240e-6)
        assert t.iloc[0]["verdict"] == "holds"
    # with the rows' buffers unset (summaries written before the column), reuse is meant
    old = [{**r, "buffers": None} for r in rows[:2]]
    assert comparisons(pd.DataFrame(old)).iloc[0]["verdict"] == "holds"
