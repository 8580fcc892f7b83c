"""The ``pingpong`` and ``reduce_local`` experiment kinds (harness/algorithms/p2p_bench.py):
planned from the config, measured by the bench loop under real MPI (one-way time, verified
echo, pair level), kept out of the allreduce reports, reported as Castelló et al.'s Fig. 4."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from conftest import execute_run, fast_settings, harness

from harness.algorithms import REGISTRY, p2p_bench
from harness.campaign import config, plan
from harness.cells import Cell
from harness.results import store as results

BASE = {"campaign": "pp", "experiments": {}}


def _cfg(**experiment):
    e = {"libraries": ["mpich"], "algorithms": ["pingpong"], "procs": [2], "sizes": ["64B"]}
    e.update(experiment)
    return config.validate({**BASE, "experiments": {"pp": e}})


def test_a_pingpong_experiment_plans_one_cell_per_pairs_and_size():
    cfg = _cfg(procs=[4], sizes=["8B", "1MiB"], params={"pairs": [1, 2]})
    cells = [c for r in plan.expand(cfg) for c in r.cells]
    assert sorted((dict(c.params)["pairs"], c.size) for c in cells) == [
        (1, 8), (1, 2**20), (2, 8), (2, 2**20)]
    assert {n: a.family for n, a in REGISTRY.items() if a.family == "p2p-bench"} == {
        "pingpong": "p2p-bench", "reduce_local": "p2p-bench"}
    both = config.validate({**BASE, "experiments": {
        "pp": {"libraries": ["mpich"], "algorithms": ["pingpong"], "procs": [2],
               "sizes": ["64B"], "params": {"pairs": [1]}},
        "rl": {"libraries": ["mpich"], "algorithms": ["reduce_local"], "procs": [2],
               "sizes": ["64B"], "dtypes": ["float32"]}}})
    runs = plan.expand(both)
    assert len(runs) == 1 and {c.algorithm for c in runs[0].cells} == {"pingpong",
                                                                        "reduce_local"}


@pytest.mark.parametrize("experiment, message", [
    ({"params": {"pairs": 2}}, "experiments.pp: parameter pairs: 2 pairs need P >= 4 ranks, "
                               "got P=2"),
    ({"procs": [1]}, "experiments.pp: procs: pingpong needs P >= 2 (one pair of ranks), got P=1"),
    ({"params": {"pairs": 0}}, "experiments.pp.params.pairs: 0 is less than the minimum of 1"),
    ({"params": {"pairs": "two"}}, "experiments.pp.params.pairs"),
    ({"algorithms": ["reduce_local"], "params": {"pairs": 1}},
     "experiments.pp: parameter pairs: reduce_local takes no parameters"),
    ({"params": {"pair": 1}}, "experiments.pp: parameter pair: pingpong takes pairs"),
    ({"timing": "imb"}, "experiments.pp: timing: pingpong is timed per repetition"),
])
def test_bad_pingpong_config_names_the_parameter(experiment, message):
    with pytest.raises(config.ConfigError, match=re.escape(message)) as exc:
        plan.expand(_cfg(**experiment))
    assert message in str(exc.value)


def test_bad_pairs_on_the_command_line_is_named(results_root):
    r = harness("run", "--library", "mpich", "--algorithm", "pingpong", "--procs", "2",
                "--param", "pairs=0")
    assert r.returncode == 2
    assert ("argument --param: parameter pairs: expected an integer >= 1 (concurrent "
            "ping-pong pairs), got 0") in r.stderr
    assert not results_root.exists() or not any(results_root.rglob("summary.csv"))


def test_levels_from_nodes_and_sockets():
    from harness.layout import emulated

    two = emulated(4, 2)
    where = [{"package": 0}, {"package": 1}, {"package": 0}, {"package": None}]
    assert p2p_bench.pair_level(two, where, 0, 2) == "network"  # different emulated nodes
    one = emulated(4, 4)
    assert p2p_bench.pair_level(one, where, 0, 2) == "socket"
    assert p2p_bench.pair_level(one, where, 1, 2) == "node"
    assert p2p_bench.pair_level(one, where, 0, 3) == "node"  # rank 3 not bound to a socket
    mine = p2p_bench.placement()
    assert isinstance(mine["bound"], bool)


SETTINGS = fast_settings(min_reps=5, max_reps=20, time_budget=5.0)


def _cell(library, algorithm, procs, size, params=(), dtype="float64"):
    return Cell(library, algorithm, procs, size, dtype=dtype, params=tuple(sorted(params)))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Real launches: MPICH P=2 (ping-pong, a corrupted echo, a local reduction), Open MPI
    P=2 (ping-pong, local reduction), MPICH P=4 with two concurrent pairs."""
    root = tmp_path_factory.mktemp("results")
    docs = []
    mpich = [_cell("mpich", "pingpong", 2, 64), _cell("mpich", "pingpong", 2, 256 * 1024),
             _cell("mpich", "pingpong", 2, 4096, [("corrupt", 1)]),
             _cell("mpich", "reduce_local", 2, 64 * 1024, dtype="float32")]
    docs.append(execute_run(root, "mpich", mpich, SETTINGS, campaign="pp")[1])
    ompi = [_cell("openmpi", "pingpong", 2, 64), _cell("openmpi", "pingpong", 2, 256 * 1024),
            _cell("openmpi", "reduce_local", 2, 2**20, dtype="float32")]
    docs.append(execute_run(root, "openmpi", ompi, SETTINGS, campaign="pp")[1])
    four = [_cell("mpich", "pingpong", 4, 4096, [("pairs", 2)])]
    docs.append(execute_run(root, "mpich", four, SETTINGS, campaign="pp")[1])
    store = results.CampaignStore(root, "pp")
    df = results.rebuild_summary(store)
    return {"root": root, "store": store, "df": df,
            "cells": {c["cell_id"]: c for d in docs for c in d["cells"]}}


def _row(df, library, algorithm, procs=2, size=None, **params):
    d = df[(df.library == library) & (df.algorithm == algorithm) & (df.procs == procs)]
    if size is not None:
        d = d[d["size"] == size]
    d = d[d.params.map(lambda p: all(json.loads(p).get(k) == v for k, v in params.items()))]
    assert len(d) == 1, d
    return d.iloc[0]


@pytest.mark.parametrize("library", ["mpich", "openmpi"])
def test_a_real_pingpong_gives_a_finite_one_way_time_and_its_level(measured, library):
    df = measured["df"]
    for size in (64, 256 * 1024):
        r = _row(df, library, "pingpong", size=size)
        assert r.status in ("ok", "not-converged"), r.error
        assert math.isfinite(r["mean"]) and r["mean"] > 0
        rec = json.loads(r.record)
        assert rec["pairs"] == 1 and rec["level"] in ("socket", "node")  # one machine
        assert isinstance(rec["bound"], bool)
        assert rec["level"] == "node" or rec["bound"]  # an unbound pair is never "socket"
        assert r.algbw == pytest.approx(size / r["mean"])
        # the repetition's value is half the low rank's round trip: the raw rows say so
        raw = pd.read_parquet(measured["store"].raw(r.run_id))
        reps = raw[raw.cell_id == r.cell_id]
        rt = np.array([f[0] - a[0] for a, f in zip(reps.arrival, reps.finish)])
        assert np.allclose(reps.mean_elapsed, rt / 2, rtol=1e-6, atol=1e-9)
        assert r["mean"] == pytest.approx(reps.mean_elapsed.mean())


def test_two_concurrent_pairs_at_p4(measured):
    r = _row(measured["df"], "mpich", "pingpong", procs=4, pairs=2)
    assert r.status in ("ok", "not-converged"), r.error
    assert math.isfinite(r["mean"]) and r["mean"] > 0
    rec = json.loads(r.record)
    assert rec["pairs"] == 2 and rec["level"] in ("socket", "node", "mixed")
    raw = pd.read_parquet(measured["store"].raw(r.run_id))
    reps = raw[raw.cell_id == r.cell_id]
    # the mean over the two low ranks (0 and 1) of half their round trip; ranks 2, 3 echo
    rt = np.array([[f[i] - a[i] for i in (0, 1)] for a, f in zip(reps.arrival, reps.finish)])
    assert np.allclose(reps.mean_elapsed, rt.mean(axis=1) / 2, rtol=1e-6, atol=1e-9)


def test_a_corrupted_echo_is_recorded_wrong(measured):
    r = _row(measured["df"], "mpich", "pingpong", size=4096, corrupt=1)
    assert r.status == "wrong" and np.isnan(r["mean"])
    assert "ranks [0]" in r.error  # the sender saw the flipped byte; the echoing rank did not


@pytest.mark.parametrize("library, size", [("mpich", 64 * 1024), ("openmpi", 2**20)])
def test_reduce_local_is_verified_and_timed(measured, library, size):
    r = _row(measured["df"], library, "reduce_local", size=size)
    assert r.status in ("ok", "not-converged"), r.error
    assert r["dtype"] == "float32" and r["mean"] > 0
    assert json.loads(r.record)["how"] == "MPI.Op.Reduce_local"
    # the repetition's value is the ranks' mean time from call to return: the raw rows say so
    raw = pd.read_parquet(measured["store"].raw(r.run_id))
    reps = raw[raw.cell_id == r.cell_id]
    took = np.array([np.mean(np.subtract(f, a)) for a, f in zip(reps.arrival, reps.finish)])
    assert np.allclose(reps.mean_elapsed, took, rtol=1e-6, atol=1e-9)
    assert r["mean"] == pytest.approx(reps.mean_elapsed.mean())


def test_rows_stay_out_of_the_allreduce_reports(measured):
    from harness.campaign import tune
    from harness.report import tables

    df = measured["df"]
    assert set(df.algorithm) == {"pingpong", "reduce_local"}
    assert tables.prepare(df).empty and tables.prepare(df, workloads=True).empty
    assert tables.auto_vs_best(tables.prepare(df)).empty
    assert tune.load(measured["root"], "pp").empty
    assert p2p_bench.without(df).empty


def test_report_files_from_a_real_run(measured, tmp_path):
    from harness.report import pingpong
    from harness.report.inputs import Inputs

    written = pingpong.make(Inputs.of(measured["store"].summary, tmp_path / "t", tmp_path / "f"))
    assert {p.name for p in written} == {"pingpong.md", "pingpong.tex", "pingpong.csv",
                                         "pingpong.html", "pingpong_fig4.png",
                                         "pingpong_fig4.pdf"}
    assert all(p.stat().st_size > 0 for p in written)
    t = pd.read_csv(tmp_path / "t" / "pingpong.csv")
    pp = t[(t.benchmark == "pingpong") & (t.library == "openmpi") & (t["size"] == 64)].iloc[0]
    row = _row(measured["df"], "openmpi", "pingpong", size=64)
    assert pp.mean_s == pytest.approx(row["mean"])
    assert pp.bytes_per_s == pytest.approx(64 / row["mean"])
    assert t[t.status == "wrong"].mean_s.isna().all()
    md = (tmp_path / "t" / "pingpong.md").read_text()
    assert "reduce_local float32 sum" in md and "Open MPI" in md and "wrong" in md
