"""Model projections past the cluster (harness/report/projection.py and harness/analysis/projection.py, `harness model project`)."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from harness import models
from harness.cli import main
from harness.models import maxrate
from harness.analysis import projection as pm
from harness.results.store import SUMMARY_COLUMNS


def _row(algorithm, procs, size, library="openmpi", status="ok", mean=1e-4, params=None,
         record=None, delay="none"):
    r = {c: "" for c in SUMMARY_COLUMNS}
    r.update(campaign="t", cell_id=f"c{algorithm}{procs}{size}{status}", library=library,
             algorithm=algorithm, procs=procs, nodes=1, size=size, count=size // 8,
             dtype="float64", op="sum", delay=delay, max_delay=0.0, late_rank=0,
             params=json.dumps(params or {}), record=json.dumps(record or {}), metric="mean",
             n=10, mean=mean, ci_low=mean * 0.99, ci_high=mean * 1.01, status=status,
             finished="2026-01-01T00:00:00")
    return r


def write_summary(path):
    """A constructed summary: SUARA cells (suara2 and Open MPI natives) at P 4..12 and 64KiB..4MiB,
    RD/SMP/NAP cells at ppn 2 (P 4..8, 8B..2KiB) and ppn 4 (P 8, 64B), plus cells that must not
    count: a failed one outside both ranges, an MPICH native, a delayed one, another harness
    algorithm."""
    rows = []
    for p in (4, 6, 12):
        for s in (65536, 4 << 20):
            rows.append(_row("suara2", p, s, params={"grid": "best-grid"}))
            rows.append(_row("native:ring", p, s))
    rows.append(_row("native:auto", 8, 1 << 20))
    rows.append(_row("native:ring", 64, 8, status="failed", mean=float("nan")))
    rows.append(_row("native:ring", 32, 8, library="mpich"))
    rows.append(_row("native:ring", 32, 8, delay="one-late"))
    rows.append(_row("ring", 128, 8))
    for alg in ("recursive_doubling", "smp", "nap"):
        for p, s in ((4, 8), (8, 2048)):
            rows.append(_row(alg, p, s, params={"layout": "emulated", "ppn": 2},
                             record={"layout": "emulated", "ppn": 2, "n_nodes": p // 2}))
        rows.append(_row(alg, 8, 64, params={"layout": "emulated", "ppn": 4},
                         record={"layout": "emulated", "ppn": 4, "n_nodes": 2}))
    rows.append(_row("nap", 16, 1 << 20, status="timeout", mean=float("nan"),
                     params={"layout": "emulated", "ppn": 4}))
    pd.DataFrame(rows, columns=SUMMARY_COLUMNS).to_csv(path, index=False)
    return path


def test_winner_map_agrees_with_brute_force():
    params = models.Params.paper()
    procs, sizes = [12, 64, 360, 1024, 5040, 16384], [8, 65536, 1 << 20, 16 << 20]
    sm = pm.suara_map(params, procs, sizes)
    for i, m in enumerate(sizes):
        for j, P in enumerate(procs):
            single, t_single = models.best_single(P, m, params)
            grids = [r for r in models.brute_force_suara2(P, m, params) if 1 < r[3] < P]
            t_grid = grids[0][0]
            assert sm["single_time"][i, j] == pytest.approx(t_single, rel=1e-12)
            assert sm["grid_time"][i, j] == pytest.approx(t_grid, rel=1e-9)
            if t_grid * (1 + pm.TIE) < t_single:
                assert sm["winner"][i, j] == "suara2"
                assert sm["speedup"][i, j] == pytest.approx(t_single / t_grid, rel=1e-9)
                pc = sm["P_c"][i, j]
                assert sm["P_r"][i, j] * pc == P
                assert models.suara2_cost(sm["a_r"][i, j], sm["a_c"][i, j], P, pc, m, params) \
                    == pytest.approx(t_grid, rel=1e-9)
            else:
                assert sm["winner"][i, j] == single and sm["speedup"][i, j] == 1.0
    # the paper's parameters: a 32 x 32 grid of segmented rings beats Rabenseifner at 16MiB
    assert sm["winner"][3, 3] == "suara2" and (sm["P_r"][3, 3], sm["P_c"][3, 3]) == (32, 32)
    assert set(sm["winner"].ravel()) - {"suara2", *models.ALL6} == set()


def test_prime_procs_have_no_grid():
    sm = pm.suara_map(models.Params.paper(), [13], [1 << 20])
    assert np.isnan(sm["grid_speedup"][0, 0]) and sm["winner"][0, 0] != "suara2"


def test_node_aware_map_agrees_with_maxrate_cost():
    params = maxrate.MaxRateParams(alpha_l=1e-6, beta_l=2e-10, alpha=3e-6, R_b=5e9, R_N=12e9,
                                   gamma=3e-10)
    procs, sizes = [16, 64, 1024, 16384], [8, 2048, 1 << 20]
    na = pm.node_aware_map(params, 16, procs, sizes)
    for i, s in enumerate(sizes):
        for j, P in enumerate(procs):
            t = {a: maxrate.cost(a, P // 16, 16, s, params).total for a in maxrate.ALGORITHMS}
            win = min(t, key=t.get)
            assert na["winner"][i, j] == win
            assert na["time"][i, j] == pytest.approx(t[win])
            assert na["speedup"][i, j] == pytest.approx(t["rd"] / t[win])
    with pytest.raises(ValueError, match="multiple of ppn"):
        pm.node_aware_map(params, 16, [24], sizes)


def test_measured_regions_from_a_constructed_summary(tmp_path):
    csv = write_summary(tmp_path / "summary.csv")
    r = pm.measured_suara(csv)
    assert (r.p_min, r.p_max, r.s_min, r.s_max, r.cells) == (4, 12, 65536, 4 << 20, 13)
    na = pm.measured_node_aware(csv)
    assert set(na) == {2, 4}
    assert (na[2].p_min, na[2].p_max, na[2].s_min, na[2].s_max, na[2].cells) == (4, 8, 8, 2048, 6)
    assert (na[4].p_min, na[4].p_max, na[4].s_min, na[4].s_max) == (8, 8, 64, 64)
    assert pm.measured_suara(tmp_path / "missing.csv") is None
    assert pm.measured_node_aware(None) == {}


def test_params_from_combined_file_and_errors(tmp_path):
    fitted = models.Params(ab={"rs": (2e-6, 1e-10), "rab": (3e-6, 2e-10)}, gamma=1e-10,
                           provenance={"source": "fit of native algorithms to x"})
    doc = fitted.to_dict()
    doc["maxrate"] = {"alpha_l": 1e-6, "beta_l": 1e-10, "alpha": 4e-6, "R_b": 8e9,
                      "R_N": 20e9, "gamma": 1e-10, "provenance": {"source": "ping-pong"}}
    f = tmp_path / "model_params.json"
    f.write_text(json.dumps(doc))
    pp = pm.load_params(campaign_dir=tmp_path)
    assert pp.hockney.ab["rs"] == (2e-6, 1e-10)
    assert pp.hockney.ab["linear"] == models.Params.paper().ab["linear"]  # filled, and said so
    assert "fit of native algorithms to x" in pp.hockney_source and "from the paper" in pp.hockney_source
    assert pp.maxrate.alpha == 4e-6 and "ping-pong" in pp.maxrate_source
    # the max-rate section of `harness fit` has no provenance source: library and fallbacks
    doc["maxrate"]["provenance"] = {"library": "openmpi", "levels": ["node"],
                                    "fallbacks": {"R_N": "only one pair measured"}}
    f.write_text(json.dumps(doc))
    assert "ping-pong fit, library openmpi; fallbacks for R_N" in pm.load_params(f).maxrate_source
    # only the Hockney part: max-rate defaults, said so
    f.write_text(json.dumps(fitted.to_dict()))
    assert "illustrative" in pm.load_params(f).maxrate_source
    # no file: the paper's and the defaults; "paper" asks for them even beside a campaign's file
    assert pm.load_params(None, tmp_path / "nowhere").hockney == models.Params.paper()
    f.write_text(json.dumps(doc))
    assert pm.load_params("paper", tmp_path).hockney == models.Params.paper()
    assert pm.load_params(None, tmp_path).hockney != models.Params.paper()
    for bad, match in [("{", "not valid JSON"), ("[1]", "expected a JSON object"),
                       ('{"foo": 1}', "no model parameters"),
                       ('{"ab": {"rs": [1e-6, 1e-10]}}', "'gamma'"),
                       ('{"ab": {"rs": [1e-6, 1e-10]}, "gamma": "x"}', "gamma"),
                       ('{"ab": {"ring": [1e-6, 1e-10]}, "gamma": 1e-10}', "unknown algorithm"),
                       ('{"maxrate": {"R_b": 0}}', "key maxrate: max-rate parameter R_b"),
                       ('{"maxrate": 3}', "key maxrate: expected an object")]:
        f.write_text(bad)
        with pytest.raises(ValueError, match=match):
            pm.load_params(f)
    with pytest.raises(ValueError, match="cannot read"):
        pm.load_params(tmp_path / "absent.json")


def test_table_is_capped_at_max_procs():
    df = pm.projection_frame(pm.load_params(), max_procs=4096, ppn=8)
    assert sorted(df["procs"].unique()) == [16, 64, 256, 1024, 4096]
    assert (df["ppn"] == 8).all() and df["na_winner"].isin(["rd", "smp", "nap"]).all()
    assert pm.procs_grid(100, multiple_of=4, low=4) == [4, 8, 12, 16, 24, 32, 36, 48, 60, 64, 100]


def test_command_writes_files_and_rejects_bad_params(tmp_path, monkeypatch, capsys):
    """`harness model project --campaign C`: the two figures and the table, the parameters
    of the campaign's model_params.json named; the whole projection, timed."""
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("HARNESS_FIGURES", str(tmp_path / "figures"))
    camp = tmp_path / "results" / "camp"
    camp.mkdir(parents=True)
    write_summary(camp / "summary.csv")
    params = models.Params.paper().to_dict()
    params["provenance"] = {"source": "a test fit"}
    (camp / "model_params.json").write_text(json.dumps(params))
    t0 = time.perf_counter()
    assert main(["model", "project", "--campaign", "camp"]) == 0
    elapsed = time.perf_counter() - t0
    out = capsys.readouterr().out
    with capsys.disabled():
        print(f"\nharness model project (maps, curves, figures, tables): {elapsed:.1f} s")
    for name in ("projection_suara.png", "projection_suara.pdf", "projection_node_aware.png",
                 "projection_node_aware.pdf"):
        assert (tmp_path / "figures" / "camp" / name).stat().st_size > 10_000
    assert "results/camp/model_params.json (a test fit)" in out
    assert "measured SUARA cells: P 4..12, size 64KiB..4MiB (13 cells)" in out
    assert "ppn 2: P 4..8, size 8B..2KiB (6 cells)" in out
    assert "| 1024 | 16MiB | SUARA2 32×32 (rs, rs) |" in out
    df = pd.read_csv(camp / "tables" / "projection.csv")
    assert sorted(df["procs"].unique()) == list(pm.TABLE_PROCS)
    assert len(df) == len(pm.TABLE_PROCS) * len(pm.TABLE_SIZES)
    r = df[(df.procs == 1024) & (df["size"] == 16 << 20)].iloc[0]
    assert r.suara_winner == "suara2" and r.speedup > 1.5
    assert r.best_single_time == pytest.approx(models.best_single(1024, 16 << 20, models.Params.paper())[1])
    assert df[(df.procs == 4096) & (df["size"] == 8)].iloc[0].na_winner == "nap"
    md = (camp / "tables" / "projection.md").read_text()
    assert "a test fit" in md and "illustrative defaults" in md
    tex = (camp / "tables" / "projection.tex").read_text()
    assert r"\begin{tabular}" in tex and "tab:projection" in tex
    # bad input: one line naming the argument and the value, nothing written
    bad = tmp_path / "bad.json"
    bad.write_text('{"ab": {"rs": [1e-6, 1e-10]}, "gamma": -1}')
    for argv, words in ([["--params", str(bad)], ["argument --params", "gamma", "-1"]],
                        [["--campaign", "nosuch"], ["argument --campaign", "nosuch"]],
                        [["--ppn", "1"], ["argument --ppn", "1"]],
                        [["--ppn", "64", "--max-procs", "32"], ["argument --ppn", "32"]]):
        with pytest.raises(SystemExit, match=r"^2$") as exc:
            main(["model", "project", *argv])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert all(w in err for w in words), err
    assert not (tmp_path / "figures" / "adhoc").exists()
