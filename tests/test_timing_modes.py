"""Thread level and timing mode: what each launch initialises, records and refuses."""

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import FAST, PLUGIN, execute_run, fast_settings, harness

from harness import cells
from harness.campaign import plan
from harness.campaign.config import ConfigError, validate
from harness.cells import Cell


def _cfg(**experiment):
    ex = {"libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [2], "sizes": ["4KiB"]}
    ex.update(experiment)
    return validate({"campaign": "t", "experiments": {"e": ex}})


def test_default_thread_level_is_single_and_online_knowledge_gets_multiple():
    runs = plan.expand(_cfg())
    assert {r.thread_level for r in runs} == {"single"}
    cfg = validate({"campaign": "t", "experiments": {
        "pap": {"libraries": ["openmpi"], "algorithms": ["prr"], "procs": [4], "sizes": ["64KiB"],
                "delays": ["one-late"], "max_delays": ["1ms"],
                "params": {"compute": "5ms", "knowledge": ["oracle", "online"]}}}})
    levels = {c.cell_id: (dict(c.params)["knowledge"], r.thread_level)
              for r in plan.expand(cfg) for c in r.cells}
    assert sorted(levels.values()) == [("online", "multiple"), ("oracle", "single")]


def test_thread_level_below_what_a_cell_needs_is_a_config_error():
    with pytest.raises(ConfigError, match=r"experiments\.pap\.thread_level.*'single'.*'multiple'"):
        plan.expand(validate({"campaign": "t", "experiments": {
            "pap": {"libraries": ["openmpi"], "algorithms": ["prr"], "procs": [4],
                    "sizes": ["64KiB"], "delays": ["one-late"], "max_delays": ["1ms"],
                    "thread_level": "single", "params": {"knowledge": "online"}}}}))


def test_thread_level_and_timing_enter_the_ids_only_when_not_default():
    base = Cell("mpich", "native:auto", 2, 4096)
    assert "thread_level" not in base.key() and "timing" not in base.key()
    ids = {base.cell_id, Cell("mpich", "native:auto", 2, 4096, thread_level="multiple").cell_id,
           Cell("mpich", "native:auto", 2, 4096, timing="imb").cell_id}
    assert len(ids) == 3
    r1 = cells.Run("mpich", (), 2, 1, (base,))
    assert len({r1.run_id, cells.Run("mpich", (), 2, 1, (base,), thread_level="multiple").run_id,
                cells.Run("mpich", (), 2, 1, (base,), launch=1).run_id}) == 3


def test_imb_timing_with_a_delay_mode_is_a_config_error():
    with pytest.raises(ConfigError, match=r"experiments\.e\.timing.*one-late"):
        plan.expand(_cfg(timing="imb", delays=["one-late"], max_delays=["1ms"]))
    with pytest.raises(ConfigError, match=r"experiments\.e\.timing"):
        _cfg(timing="sometimes")


@pytest.mark.parametrize("library", ["mpich", "openmpi", "impi"])
def test_imb_mode_measures_samples_of_back_to_back_calls(results_root, library):
    cells = [Cell(library, "native:auto", 2, s, "float32", timing="imb") for s in (8, 65536)]
    outcome, doc, store = execute_run(results_root, library, cells,
                                      settings=fast_settings(imb_iterations=20))
    assert outcome == "complete"
    for c in doc["cells"]:
        assert c["status"] in ("ok", "not-converged"), c
        assert c["timing"] == "imb" and c["sync"] == "imb"
        assert c["record"]["imb_iterations"] == 20
        assert c["stats"]["mean"] > 0
    raw = pq.read_table(store.raw(doc["run_id"])).to_pandas()
    assert set(raw.iterations) == {20}
    # per call, not per sample, at any speed: the slowest rank's time per call, times the
    # calls, fits in the longest rank's sample (its Wtime pairs lie inside the sample's)
    spans = [max(f - a for a, f in zip(arr, fin)) for arr, fin in zip(raw.arrival, raw.finish)]
    assert (raw.max_elapsed.to_numpy() * 20 <= [s * (1 + 1e-9) + 1e-12 for s in spans]).all()
    df = pd.read_csv(store.summary) if store.summary.exists() else None
    from harness.results.store import rebuild_summary

    df = rebuild_summary(store)
    assert set(df.timing) == {"imb"} and set(df.thread_level) == {"single"}


def test_imb_mode_default_iterations_follow_imb():
    from harness.measure.modes import imb_iterations

    assert imb_iterations(8) == 1000
    assert imb_iterations(2**20) == 40
    assert imb_iterations(2**30) == 1


def test_imb_mode_records_a_wrong_result_as_wrong(results_root):
    out = harness("run", "--library", "mpich", "--algorithm", "test:wrong", "--plugin", PLUGIN,
                  "--procs", "2", "--size", "1KiB", "--timing", "imb", "--imb-iterations", "5",
                  *FAST)
    assert out.returncode == 1, out.stderr
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert list(df.status) == ["wrong"] and list(df.timing) == ["imb"]


def test_thread_level_option_reaches_mpi_and_the_summary(results_root):
    out = harness("run", "--library", "mpich", "--procs", "2", "--size", "1KiB",
                  "--thread-level", "multiple", *FAST)
    assert out.returncode == 0, out.stderr
    df = pd.read_csv(results_root / "adhoc" / "summary.csv")
    assert list(df.thread_level) == ["multiple"]
    doc = json.loads(next((results_root / "adhoc" / "runs").glob("*.json")).read_text())
    assert doc["provenance"]["thread_level"] == "multiple"
    assert doc["thread_level"] == "multiple"


def test_thread_level_below_need_and_imb_with_delays_are_refused_on_the_cli(results_root):
    out = harness("run", "--library", "openmpi", "--algorithm", "prr", "--procs", "2",
                  "--thread-level", "single", "--param", "knowledge=online")
    assert out.returncode == 2 and "--thread-level" in out.stderr
    out = harness("run", "--timing", "imb", "--delay", "one-late", "--max-delay", "1ms")
    assert out.returncode == 2 and "--timing" in out.stderr
    assert not results_root.exists()


def test_oversubscribed_launch_is_marked_and_gets_its_own_budget(results_root):
    """P = cores + 1 with an unreachable precision and more repetitions than the budget
    allows: only a time budget can end the cell, and it is the oversubscribed one (2 s), not
    the normal one (120 s), that does, after measuring for that long."""
    import os

    import numpy as np

    procs = (os.cpu_count() or 1) + 1
    budget, normal_budget, max_reps = 2.0, 120.0, 100_000
    cells = [Cell("mpich", "native:auto", procs, 4096)]
    outcome, doc, store = execute_run(
        results_root, "mpich", cells,
        settings=fast_settings(precision=1e-9, max_reps=max_reps, warmup=0,
                               time_budget=normal_budget, oversubscribed_time_budget=budget))
    assert outcome == "complete"
    (c,) = doc["cells"]
    assert c["status"] == "not-converged" and c["record"]["oversubscribed"] is True
    raw = pq.read_table(store.raw(doc["run_id"])).to_pandas()
    n = c["stats"]["n"]
    assert n == len(raw) and n < max_reps  # precision never holds: a budget ended it
    arrival, finish = np.stack(raw.arrival), np.stack(raw.finish)  # (reps, ranks), one clock
    since_first = finish - arrival[0]  # each rank's seconds from its first arrival
    # the budget is checked after every repetition: all but the last ended inside it (with
    # the normal budget they would go on for 120 s) ...
    assert (since_first[:-1] < budget).all(), since_first.max(axis=1)
    # ... and the last one ended past it, less the first repetition's two barriers: the
    # cell measured for its budget, not one repetition
    assert since_first[-1].max() >= 0.5 * budget, (n, since_first[-1])
    from harness.results.store import rebuild_summary

    df = rebuild_summary(store)
    assert bool(df.oversubscribed.iloc[0]) is True


def test_status_counts_cells_by_fit_and_status(results_root):
    d = results_root / "c"
    d.mkdir(parents=True)
    pd.DataFrame({"cell_id": list("abcde"), "status": ["ok", "ok", "not-converged", "failed", "ok"],
                  "oversubscribed": [False, False, False, None, True]}).to_csv(d / "summary.csv",
                                                                                index=False)
    out = harness("status", "c")
    assert out.returncode == 3, out.stderr  # the failed cell: the last line says so
    assert out.stdout.splitlines()[-1].startswith("campaign c: 1 of 5 cells gave no result: 1 failed")
    assert "converged where P <= cores: 2/3 (67%)" in out.stdout
    assert "P > cores" in out.stdout and "unknown" in out.stdout
    out = harness("status", "missing")
    assert out.returncode == 2 and "missing" in out.stderr
