"""SUARA2 against the paper's checks (``harness/algorithms/suara.py``,
``harness/report/suara.py``): fitted parameters from a ``model_params.json`` (``model=``),
the paper's small-message rule (``small=native-best``), the 36-combination agreement table,
and the 3-step decomposition (``three_step``) against the reference reduction."""

import json
import os
import sys

import pandas as pd
import pytest
from conftest import FAST, REPO, execute_run, fast_settings, harness, run_mpi

from harness import models
from harness.algorithms import suara

MiB = 2**20
MPICH = REPO / ".mpi" / "mpich"


def _fitted() -> models.Params:
    """Parameters whose decisions differ from the paper's at P = 4: ring (rnos) is the best
    single algorithm, (rd, rd) on 2 x 2 the best grid."""
    ab = {a: (2e-6, 4e-10) for a in models.ALL6}
    ab["rnos"] = (1e-6, 1e-10)
    ab["rd"] = (1e-6, 0.5e-10)
    return models.Params(ab=ab, gamma=1e-10, provenance={"source": "fit of native algorithms to test"})


@pytest.fixture
def model_file(tmp_path):
    d = _fitted().to_dict()
    d["pingpong"] = {"alpha": 1e-6, "beta": 1e-10}  # extra top-level keys of a newer fit
    d["maxrate"] = {"R_N": 1e10}
    path = tmp_path / "model_params.json"
    path.write_text(json.dumps(d))
    return path


def _only_cell(results_root):
    doc = json.loads(next((results_root / "adhoc" / "runs").glob("*.json")).read_text())
    (cell,) = doc["cells"]
    return cell


def test_model_file_decides_and_is_recorded(results_root, model_file):
    P, m = 4, MiB
    mine = models.decide_suara2(P, m, _fitted(), grids_only=True)
    assert mine[:4] != models.decide_suara2(P, m, models.Params.paper(), grids_only=True)[:4]
    out = harness("run", "--library", "openmpi", "--algorithm", "suara2", "--param", "grid=best-grid",
                  "--param", "subs=native", "--param", f"model={model_file}", "--procs", P,
                  "--size", "1MiB", *FAST)
    assert out.returncode == 0, out.stdout + out.stderr
    cell = _only_cell(results_root)
    assert cell["status"] in ("ok", "not-converged"), cell.get("error")
    rec = cell["record"]
    a_r, a_c, pr, pc, predicted, _ = mine
    assert (rec["P_r"], rec["P_c"]) == (pr, pc)
    assert (rec["row"], rec["col"]) == (suara.MODEL_TO_OPENMPI[a_r], suara.MODEL_TO_OPENMPI[a_c])
    assert rec["predicted"] == pytest.approx(predicted)
    import hashlib
    assert rec["model"] == str(model_file)
    assert rec["model_source"] == "fit of native algorithms to test"
    assert rec["model_sha256"] == hashlib.sha256(model_file.read_bytes()).hexdigest()[:12]


def test_bad_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"parameter model: cannot read 'results/none/model_params.json' "
                                         r"\(.*results/none/model_params.json\): no such file"):
        suara.choose(4, MiB, {"grid": "auto", "model": "results/none/model_params.json"})
    bad = tmp_path / "broken.json"
    bad.write_text("{\"gamma\": 1e-10}")
    with pytest.raises(ValueError, match=r"parameter model: .*broken.json.* is not a model_params.json"):
        suara.model_params({"model": str(bad)})
    with pytest.raises(ValueError, match="parameter small: expected 'off' or 'native-best', got 'yes'"):
        suara.small_rule(4, MiB, {"small": "yes"})
    with pytest.raises(ValueError, match="parameter small_max"):
        suara.small_rule(4, MiB, {"small": "native-best", "small_max": "lots"})


def test_model_path_relative_to_the_repository_root(model_file):
    rel = os.path.relpath(model_file, REPO)
    mp, rec = suara.model_params({"model": rel})
    assert mp.ab == _fitted().ab and rec["model"] == rel


def test_small_rule_threshold_is_inclusive():
    p = {"small": "native-best"}
    name, rec = suara.small_rule(4, MiB, p)  # the paper: "less than or equal to 1 MB"
    best, _ = models.best_single(4, MiB, models.Params.paper())
    assert name == suara.MODEL_TO_OPENMPI[best] and rec["small_rule"] is True
    assert suara.small_rule(4, MiB + 8, p) is None
    assert suara.small_rule(4, 64 * 1024, {**p, "small_max": "32KiB"}) is None
    assert suara.small_rule(4, 64, {"small": "off"}) is None


def test_small_rule_runs_best_native_below_and_suara2_above(results_root, model_file):
    from harness.cells import Cell

    params = (("grid", "best-grid"), ("model", str(model_file)), ("small", "native-best"),
              ("subs", "native"))
    cells = [Cell("openmpi", "suara2", 4, size, params=params) for size in (MiB, MiB + 8)]
    outcome, doc, _ = execute_run(results_root, "openmpi", cells,
                                  settings=fast_settings(time_budget=5.0), algorithm_env={})
    recs = {c["cell"]["size"]: c for c in doc["cells"]}
    below, above = recs[MiB], recs[MiB + 8]
    for c in (below, above):
        assert c["status"] in ("ok", "not-converged"), c.get("error")
    best, t_best = models.best_single(4, MiB, _fitted())
    assert best == "rnos"  # the file's pick, not the paper's (rs)
    r = below["record"]
    assert r["small_rule"] is True and r["small_algorithm"] == "rnos"
    assert r["row"] == r["col"] == "native:ring" and (r["P_r"], r["P_c"]) == (1, 4)
    assert r["row_forcing"] in ("mpit-dup", "launch-env") and r["small_max"] == "1MiB"
    a_r, a_c, pr, pc, _, _ = models.decide_suara2(4, MiB + 8, _fitted(), grids_only=True)
    r = above["record"]
    assert r["small_rule"] is False
    assert (r["P_r"], r["P_c"], r["row"]) == (pr, pc, suara.MODEL_TO_OPENMPI[a_r])


# ------------------------------------------------------------------------- agreement table

def _frame(cases):
    """Summary rows (as ``report.suara._load`` gives them) of a grid sweep: ``cases`` maps a
    size to {(grid, row, col): (mean, half-width)}."""
    rows = []
    for size, configs in cases.items():
        for (grid, row, col), (mean, hw) in configs.items():
            rows.append({"library": "openmpi", "algorithm": "suara2", "procs": 12, "size": size,
                         "dtype": "float64", "op": "sum", "mean": mean, "ci_low": mean - hw,
                         "ci_high": mean + hw, "oversubscribed": size == 3 * MiB,
                         "p": {"grid": grid, "row": row, "col": col}, "r": {}})
    return pd.DataFrame(rows)


def test_agreement_table_agree_tie_loss():
    from harness.report import suara as rep

    params = _fitted()
    rs, ring = "native:segmented_ring", "native:ring"
    configs = [("6x2", rs, rs), ("4x3", ring, ring), ("3x4", rs, ring)]

    def ranked(size):  # the model's pick at that size first
        return sorted(configs, key=lambda c: models.suara2_cost(
            rep._model_name(c[1]), rep._model_name(c[2]), 12, int(c[0].split("x")[1]), size, params))

    p, o1, o2 = ranked(4 * MiB)
    agree = {p: (1.0e-2, 1e-4), o1: (1.5e-2, 1e-4), o2: (2e-2, 1e-4)}
    p2, o1, o2 = ranked(2 * MiB)
    tie = {p2: (1.04e-2, 5e-4), o1: (1.0e-2, 5e-4), o2: (2e-2, 1e-4)}
    p3, o1, o2 = ranked(3 * MiB)
    loss = {p3: (1.5e-2, 1e-4), o1: (1.0e-2, 1e-4), o2: (1.2e-2, 1e-4)}
    pick = p
    t = rep.agreement_table(_frame({4 * MiB: agree, 2 * MiB: tie, 3 * MiB: loss}),
                            [("fitted", params)])
    by = {r["size"]: r for _, r in t.iterrows()}
    a, ti, lo = by["4MiB"], by["2MiB"], by["3MiB"]
    assert (a["agree"], a["rank"], a["loss"], a["verdict"]) == ("yes", "1 of 3", "+0.0%", "agree")
    assert (ti["agree"], ti["rank"], ti["verdict"]) == ("no", "2 of 3", "tie (CIs overlap)")
    assert ti["loss"] == "+4.0%"
    assert (lo["agree"], lo["rank"], lo["loss"], lo["verdict"]) == ("no", "3 of 3", "+50.0%", "loss")
    assert lo["timing claim"] == "none (oversubscribed)" and a["timing claim"] == "yes"
    assert a["model's pick"].startswith(f"{pick[0]} (")
    summary = rep.agreement_summary(t)
    assert "fitted: model's pick is the measured best in 1 of 3 cases" in summary
    assert "1 more within the CIs (tie)" in summary and "1 oversubscribed" in summary


def test_agreement_models_include_the_campaign_fit(tmp_path, model_file):
    from harness.report import suara as rep

    summary = tmp_path / "summary.csv"
    summary.write_text("")
    used = rep.agreement_models(summary)
    assert [u[0] for u in used] == ["paper Table 4", "fitted (model_params.json)"]
    assert used[1][1].ab == _fitted().ab


# ------------------------------------------------------------------------------ three_step

CHECK_THREE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from mpi4py import MPI
from harness import verify
from harness.algorithms import REGISTRY, Context
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
ops = {"sum": MPI.SUM, "max": MPI.MAX}
grids = ["auto"] + [f"{size // c}x{c}" for c in range(1, size + 1) if size % c == 0]
fails, checks = [], 0
for g in grids:
    for col in ("native", "ring"):
        ctx = Context(params={"grid": g, "col": col})
        for dtype in ("float64", "int32"):
            for opname, op in ops.items():
                for count in (0, 1, size - 1, size + 1, 7, 1001, 4099):
                    send = verify.contribution(rank, count, dtype, opname)
                    keep = send.copy()
                    want = verify.expected(size, count, dtype, opname)
                    for call in (1, 2):
                        recv = verify.aligned_empty(count, dtype)
                        recv.fill(verify.sentinel(dtype))
                        REGISTRY["three_step"].fn(comm, send, recv, op, ctx)
                        checks += 1
                        if not np.array_equal(recv, want) or not np.array_equal(send, keep):
                            fails.append(f"grid={g} col={col} dtype={dtype} op={opname} "
                                         f"count={count} call={call} P={size}")
every = comm.gather(fails, root=0)
total = comm.reduce(checks, root=0)
if rank == 0:
    flat = [f for fs in every for f in fs]
    if flat:
        print("FAILED", len(flat), flat[:10])
        sys.exit(1)
    print("OK", total)
"""


@pytest.mark.parametrize("procs", [2, 3, 4, 5, 6])
def test_three_step_matches_the_reference(tmp_path, procs):
    script = tmp_path / "check_three.py"
    script.write_text(CHECK_THREE)
    env = {**os.environ, "MPI4PY_LIBMPI": str(MPICH / "lib" / "libmpi.so.12"),
           "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
           "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "100"}
    proc = run_mpi([str(MPICH / "bin" / "mpiexec"), "-n", str(procs), sys.executable,
                    str(script), str(REPO)], capture_output=True, text=True, timeout=300,
                   env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    grids = sum(1 for c in range(1, procs + 1) if procs % c == 0) + 1
    assert proc.stdout.split() == ["OK", str(grids * 2 * 2 * 2 * 7 * 2 * procs)]


def test_three_step_grid_choice():
    assert suara.choose_three(12, {}) == (4, 3)
    assert suara.choose_three(7, {"grid": "auto"}) == (1, 7)  # prime: the 2-step decomposition
    assert suara.choose_three(16, {"grid": "best-grid"}) == (4, 4)
    assert suara.choose_three(6, {"grid": "3x2"}) == (3, 2)
    with pytest.raises(ValueError, match="three_step: grid 5x2 does not arrange P=6"):
        suara.choose_three(6, {"grid": "5x2"})
