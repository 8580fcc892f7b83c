"""SUARA tables and figures (``harness/report/suara.py``) on a synthetic summary (no MPI):
times generated from the models, so the expected picks are known."""

import json

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from test_report import row  # noqa: E402

from harness import models  # noqa: E402
from harness.algorithms.suara import MODEL_TO_OPENMPI  # noqa: E402
from harness.report import suara  # noqa: E402
from harness.report.inputs import Inputs  # noqa: E402
from harness.report.registry import REPORTS  # noqa: E402

MiB = 2**20
TRUE = models.Params(ab={a: (3e-6 * (1 + i / 5), 2e-10 * (1 + i / 3)) for i, a in enumerate(models.ALL6)},
                     gamma=1e-10)


def synthetic(tmp_path):
    rows = []
    for P in (4, 6, 8, 12, 16):
        for m in (64 * 1024, MiB, 4 * MiB):
            for name, model in models.NATIVE_OPENMPI.items():
                rows.append(row("openmpi", name, m, models.cost(model, P, m, TRUE), procs=P,
                                cell_id=f"n{P}{m}{name}"))
            rows.append(row("openmpi", "native:auto", m, 1.2 * models.cost("rab", P, m, TRUE),
                            procs=P, cell_id=f"a{P}{m}"))
            ch = models.select_suara2(P, m, TRUE)
            g = ch.best_grid or ch
            rows.append(row("openmpi", "suara2", m, g.time, procs=P, cell_id=f"s{P}{m}",
                            params=json.dumps({"grid": "best-grid", "subs": "native"}),
                            record=json.dumps({"P_r": g.P_r, "P_c": g.P_c,
                                               "row": MODEL_TO_OPENMPI[g.a_r],
                                               "col": MODEL_TO_OPENMPI[g.a_c],
                                               "fallback": None})))
    for m in (MiB, 4 * MiB):  # the Fig. 7 sweep at P = 16, measured = model
        for pc in models.divisors(16):
            rows.append(row("openmpi", "suara2", m,
                            models.suara2_cost("rs", "rs", 16, pc, m, TRUE), procs=16,
                            cell_id=f"g{pc}{m}",
                            params=json.dumps({"grid": f"{16 // pc}x{pc}", "row": "native:segmented_ring",
                                               "col": "native:segmented_ring"})))
    path = tmp_path / "summary.csv"
    df = pd.DataFrame(rows)
    df.to_csv(path, index=False)
    return path


def test_make_suara_writes_every_table_and_figure(tmp_path):
    path = synthetic(tmp_path)
    written = suara.make(Inputs.of(path, tmp_path / "tables", tmp_path / "figures"))
    names = {p.name for p in written}
    for t in REPORTS["suara"].tables:
        assert {f"{t}.md", f"{t}.tex", f"{t}.csv"} <= names
    for f in REPORTS["suara"].figures:
        assert {f"{f}.png", f"{f}.pdf"} <= names
    assert all(p.stat().st_size > 0 for p in written)


def test_fit_recovers_the_generating_parameters_and_the_model_agrees(tmp_path):
    path = synthetic(tmp_path)
    params, how = suara.fitted_params(path, gamma=TRUE.gamma)
    assert how.startswith("fitted")
    for a in models.ALL6:
        assert params.ab[a][0] == pytest.approx(TRUE.ab[a][0], rel=1e-6)
        assert params.ab[a][1] == pytest.approx(TRUE.ab[a][1], rel=1e-6)
    d = suara._load(path)
    agree = suara.agreement_table(d, TRUE)
    assert len(agree) == 2 and (agree["agree"] == "yes").all()
    choice = suara.choice_table(d, TRUE)
    assert len(choice) == 15
    r = choice[(choice["P"] == 16) & (choice["size"] == "4MiB")].iloc[0]
    g = models.select_suara2(16, 4 * MiB, TRUE).best_grid
    assert r["grid"] == f"{g.P_r} x {g.P_c}"
    assert r["predicted"] == r["measured"]
    vs = suara.model_table(d, TRUE)
    assert (vs["measured / model"] == "1.00").all()


def test_empty_summary_gives_placeholder_figures(tmp_path):
    path = tmp_path / "summary.csv"
    pd.DataFrame([row("mpich", "native:auto", 4096, 1e-5)]).to_csv(path, index=False)
    written = suara.make(Inputs.of(path, tmp_path / "t", tmp_path / "f"))
    assert (tmp_path / "f" / "suara_grid.png").is_file()
    assert "fitted_params.md" in {p.name for p in written}
