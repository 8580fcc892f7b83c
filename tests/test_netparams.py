"""Network parameters from ping-pong and reduce_local rows (harness/analysis/netparams.py), the combined
model_params.json, `harness fit` / `harness model nap --params`, and the Castelló / Bienz
model reports (harness/report/castello_models.py)."""

import json
import re

import pandas as pd
import pytest
from conftest import harness

from harness import models
from harness.analysis import netparams
from harness.models import maxrate
from harness.analysis import castello as cd
from harness.report import castello_models as cm
from harness.report.inputs import Inputs
from harness.results.store import SUMMARY_COLUMNS

# exact parameters the synthetic rows are generated from
LEVEL = {"socket": (0.3e-6, 4e-11), "node": (0.9e-6, 9e-11), "network": (2.5e-6, 1.6e-10)}
GAMMA = 1.25e-10
SIZES = [8 * 4 ** i for i in range(12)]  # 8 B .. 32 MiB
BASE = dict(status="ok", dtype="float32", op="sum", delay="none", max_delay=0.0,
            oversubscribed=False, library_version="x", nodes=1, late_rank=0, metric="mean",
            finished="2026-01-01", n=10)


def slowdown(k):
    """k concurrent pairs share the injection bandwidth: the byte term grows with k."""
    return 1.0 if k == 1 else 0.6 * k


def pingpong(library, levels=LEVEL, pairs=(1,), sizes=SIZES):
    rows = []
    for level, (a, b) in levels.items():
        for k in pairs:
            for s in sizes:
                rows.append(dict(BASE, library=library, algorithm="pingpong", procs=2 * k, size=s,
                                 mean=a + b * slowdown(k) * s, params=json.dumps({"pairs": k}),
                                 record=json.dumps({"level": level, "pairs": k})))
    return rows


def reduce_local(library, gamma=GAMMA):
    return [dict(BASE, library=library, algorithm="reduce_local", procs=1, size=s,
                 mean=3e-6 + gamma * s, params="{}", record="{}")
            for s in [65536 * 2 ** i for i in range(11)]]


def write(rows, path):
    df = pd.DataFrame(rows)
    df["ci_low"], df["ci_high"] = df["mean"] * 0.99, df["mean"] * 1.01
    df.reindex(columns=SUMMARY_COLUMNS).to_csv(path, index=False)
    return path


def test_fit_recovers_exact_parameters(tmp_path):
    rows = pingpong("openmpi", pairs=(1, 2, 4)) + reduce_local("openmpi")
    rows += pingpong("mpich", levels={"node": (1.1e-6, 1e-10)})
    doc = netparams.fit_file(write(rows, tmp_path / "s.csv"), campaign="syn")
    pp = doc["pingpong"]["openmpi"]
    a, b = LEVEL["network"]
    assert pp["level"] == "network" and pp["n"] == len(SIZES)
    assert pp["alpha"] == pytest.approx(a, rel=1e-6) and pp["beta"] == pytest.approx(b, rel=1e-6)
    assert pp["r2"] == pytest.approx(1.0) and pp["sizes"] == [8, SIZES[-1]]
    assert pp["gamma"] == pytest.approx(GAMMA, rel=1e-6)
    assert doc["pingpong"]["mpich"]["alpha"] == pytest.approx(1.1e-6, rel=1e-6)
    assert doc["pingpong"]["mpich"]["level"] == "node"
    mr = doc["maxrate"]
    assert mr["alpha_l"] == pytest.approx(LEVEL["node"][0], rel=1e-6)  # node beats socket
    assert mr["beta_l"] == pytest.approx(LEVEL["node"][1], rel=1e-6)
    assert mr["alpha"] == pytest.approx(a, rel=1e-6) and mr["R_b"] == pytest.approx(1 / b, rel=1e-6)
    # R_N: the largest k*size/time over k and sizes (4 pairs, largest size here)
    s = SIZES[-1]
    assert mr["R_N"] == pytest.approx(4 * s / (a + b * slowdown(4) * s), rel=1e-9)
    assert mr["gamma"] == pytest.approx(GAMMA, rel=1e-6)
    assert mr["provenance"]["fallbacks"] == {} and mr["provenance"]["library"] == "openmpi"
    # no native cells: every Table 1 algorithm gets the ping-pong pair, and says so
    assert set(doc["ab"]) == set(models.ALL6)
    assert doc["ab"]["rs"]["alpha"] == pytest.approx(a, rel=1e-6)
    assert "ping-pong (alpha, beta) pair" in doc["provenance"]["assumed"]
    assert doc["gamma"] == pytest.approx(GAMMA, rel=1e-6)


def test_relative_weighting_fixes_alpha_where_plain_least_squares_does_not():
    a, b = 1e-6, 1e-10
    sizes = [8 * 4 ** i for i in range(13)]
    times = [(a + b * s) * (1.03 if i % 2 else 0.97) for i, s in enumerate(sizes)]  # 3% noise
    w = netparams.fit_hockney(sizes, times)
    plain = netparams.fit_hockney(sizes, times, weighting="none")
    assert w["alpha"] == pytest.approx(a, rel=0.1) and w["beta"] == pytest.approx(b, rel=0.05)
    assert abs(plain["alpha"] - a) > 0.5 * a  # the 32 MiB messages decide plain alpha
    with pytest.raises(netparams.FitError, match="two distinct sizes"):
        netparams.fit_hockney([64, 64], [1e-6, 1e-6])


def test_missing_levels_fall_back_with_provenance(tmp_path):
    rows = pingpong("openmpi", levels={"socket": LEVEL["socket"]}) + reduce_local("openmpi")
    doc = netparams.fit_file(write(rows, tmp_path / "s.csv"))
    mr, prov = doc["maxrate"], doc["maxrate"]["provenance"]
    a, b = LEVEL["socket"]
    assert mr["alpha_l"] == pytest.approx(a, rel=1e-6) and mr["alpha"] == pytest.approx(a, rel=1e-6)
    assert mr["R_b"] == pytest.approx(1 / b, rel=1e-6)
    fb = prov["fallbacks"]
    assert fb["alpha_l, beta_l"] == "node not measured: alpha_l, beta_l := socket level"
    assert fb["alpha, R_b"] == "network not measured: alpha, R_b := socket level"
    assert "only one pair measured" in fb["R_N"]
    assert mr["R_N"] == pytest.approx(max(s / (a + b * s) for s in SIZES), rel=1e-9)


def test_combined_file_is_read_by_params_and_maxrate(tmp_path):
    rows = pingpong("openmpi", pairs=(1, 2)) + reduce_local("openmpi")
    out = tmp_path / "model_params.json"
    netparams.write(write(rows, tmp_path / "s.csv"), out, campaign="syn")
    doc = json.loads(out.read_text())
    p = models.Params.from_dict(doc)
    assert p.alpha("rab") == pytest.approx(LEVEL["network"][0], rel=1e-6)
    assert p.gamma == pytest.approx(GAMMA, rel=1e-6)
    mr = maxrate.MaxRateParams.from_dict(doc)
    assert mr == netparams.load_maxrate(out)
    assert mr.alpha_l == pytest.approx(LEVEL["node"][0], rel=1e-6)
    # a Hockney-only file (no ping-pong) names what is missing
    with pytest.raises(ValueError, match="no 'maxrate' section"):
        maxrate.MaxRateParams.from_dict(models.Params.paper().to_dict())
    with pytest.raises(ValueError, match="'ab' and 'gamma'"):
        models.Params.from_dict({"alpha_l": 1e-6})


def test_fit_cli_refuses_a_campaign_without_either_kind(results_root, tmp_path):
    camp = results_root / "none"
    camp.mkdir(parents=True)
    rows = [dict(BASE, library="openmpi", algorithm="ring", procs=4, size=1024, mean=1e-5,
                 params="{}", record="{}")]
    write(rows, camp / "summary.csv")
    out = harness("fit", "none")
    assert out.returncode == 1
    assert "neither native allreduce cells nor ping-pong cells (algorithms: ring)" in out.stderr
    assert not (camp / "model_params.json").exists()


def test_fit_cli_then_model_nap_uses_the_fitted_values(results_root, tmp_path):
    camp = results_root / "pp"
    camp.mkdir(parents=True)
    write(pingpong("openmpi", pairs=(1, 2)) + reduce_local("openmpi"), camp / "summary.csv")
    out = harness("fit", "pp")
    assert out.returncode == 0, out.stderr
    assert "ping-pong openmpi  level network alpha" in out.stdout and "max-rate (openmpi)" in out.stdout
    f = camp / "model_params.json"
    mr = netparams.load_maxrate(f)
    out = harness("model", "nap", "--params", f, "--procs", "16", "--ppn", "4", "--size", "1MiB")
    assert out.returncode == 0, out.stderr
    want = maxrate.cost("nap", 4, 4, 2**20, mr).total
    from harness.units import format_time
    assert f"predicted   {format_time(want)}" in out.stdout
    assert f"alpha={mr.alpha:g} s" in out.stdout and f"R_N={mr.R_N:g} B/s" in out.stdout
    # the defaults give another number
    assert format_time(maxrate.cost("nap", 4, 4, 2**20, maxrate.MaxRateParams.defaults()).total) != format_time(want)
    out = harness("model", "suara2", "--params", f, "--procs", "16", "--size", "1MiB")
    assert out.returncode == 0, out.stderr


def test_table1_in_bytes_and_overlap_variants():
    a, b, g, m, p = 2e-6, 1e-10, 5e-11, 2**20, 4
    L, B, A = cd.parts("RNG", p, m, a, b, g)
    assert (L, B, A) == pytest.approx((6 * a, 2 * m * 0.75 * b, m * 0.75 * g))
    L, B, A = cd.parts("SRG", p, m, a, b, g, segment=65536)  # s = 16 segments
    assert (L, B, A) == pytest.approx(((8 + 16 - 3) * a, ((4 + 16 - 2) * m / 16 + 3 * m / 4) * b,
                                       (4 + 16 - 2) * m / 16 * g))
    for alg in cd.ALGORITHMS:
        v = cd.variants(alg, 8, m, a, b, g)
        assert v["OVL"] <= v["THEO"] <= v["NOVL"]
        L, B, A = cd.parts(alg, 8, m, a, b, g)
        assert v["NOVL"] == pytest.approx(2 * L + 2 * B + A) and v["OVL"] == pytest.approx(L + max(B, A))


def test_reports_written(tmp_path):
    rows = pingpong("openmpi", pairs=(1, 2)) + reduce_local("openmpi")
    for P in (2, 4):
        for alg, nat in cd.NATIVE["openmpi"].items():
            for s in (4096, 2**20, 2**24):
                rows.append(dict(BASE, library="openmpi", algorithm=nat, procs=P, size=s,
                                 mean=2 * cd.variants(alg, P, s, *LEVEL["network"], GAMMA)["THEO"],
                                 params="{}", record="{}"))
    summary = write(rows, tmp_path / "summary.csv")
    written = cm.make(Inputs.of(summary, tmp_path / "tables", tmp_path / "fig"))
    names = {p.name for p in written}
    for n in ("castello_models", "network_params"):
        assert {f"{n}.md", f"{n}.tex", f"{n}.csv"} <= names
    for n in ("castello_fig1", "castello_fig2", "castello_fig3", "maxrate_fig5"):
        assert {f"{n}.png", f"{n}.pdf"} <= names
        assert (tmp_path / "fig" / f"{n}.png").stat().st_size > 10_000
    t = pd.read_csv(tmp_path / "tables" / "castello_models.csv")
    assert len(t) == 2 * 5 * 3
    assert t["real_over_theo"].to_numpy() == pytest.approx(0.5)  # measured = 2 x THEO
    params = (tmp_path / "tables" / "network_params.md").read_text()
    assert "Castelló et al." in params and "SUARA Table 4" in params and "2.50 µs" in params
    # a parameter file without ping-pong makes placeholders for Figs. 2-3, not a crash
    pf = tmp_path / "hockney.json"
    pf.write_text(json.dumps(models.Params.paper().to_dict()))
    written = cm.make(Inputs.of(summary, tmp_path / "t2", tmp_path / "f2", params=pf))
    assert (tmp_path / "f2" / "castello_fig2.png").exists()
    assert (tmp_path / "f2" / "castello_fig1.png").stat().st_size > 10_000  # paper's curves only
    # Fig. 1: RNG at p = 50, n = 16 MiB with the paper's alpha, beta, gamma, by hand
    xs, ys = cm.fig1_curves(**cd.CASTELLO)["delta"]
    n, a, b, g = 16 * 2**20, 2e-6, 1 / 11.77e9, 1 / 32e9
    want = n / (98 * a + 2 * n * 49 / 50 * b + n * 49 / 50 * g / 2) / 2**20  # delta = 2
    assert ys["RNG"][list(xs).index(2.0)] == pytest.approx(want)
    assert len(pd.read_csv(tmp_path / "t2" / "castello_models.csv")) == 0


def test_real_pingpong_run_is_fitted_end_to_end(results_root, tmp_path):
    """One real Open MPI launch at P=2 (ping-pong at three sizes, a local reduction at two),
    then `harness fit` and `harness model nap` on its summary."""
    from conftest import execute_run, fast_settings

    from harness.cells import Cell
    from harness.results import store as results

    cells = [Cell("openmpi", "pingpong", 2, s, params=(("pairs", 1),)) for s in (8, 2**16, 2**22)]
    cells += [Cell("openmpi", "reduce_local", 2, s, dtype="float32") for s in (2**16, 2**22)]
    outcome, _, store = execute_run(results_root, "openmpi", cells, fast_settings(time_budget=3.0),
                                    campaign="real", algorithm_env={})
    results.rebuild_summary(store)
    out = harness("fit", "real")
    assert out.returncode == 0, out.stderr + out.stdout
    doc = json.loads((store.dir / "model_params.json").read_text())
    pp = doc["pingpong"]["openmpi"]
    assert pp["n"] == 3 and pp["sizes"] == [8, 2**22] and pp["level"] in netparams.LEVELS
    assert pp["alpha"] >= 0 and pp["beta"] >= 0 and doc["gamma"] > 0
    assert doc["provenance"]["gamma_from"]["dtype"] == "float32"
    # which way the bandwidth fit goes is this machine's to say: two oversubscribed Open MPI
    # ranks yield the core between messages, and under load every size took one scheduler
    # tick (3.9-4.4 ms in one CI rehearsal), so beta may fit to 0. Both ways are made certain
    # by editing this run's ping-pong means, and each is checked.
    summary = pd.read_csv(store.summary)
    ping = summary["algorithm"] == "pingpong"
    base = float(summary.loc[ping & (summary["size"] == 8), "mean"].iloc[0])
    sizes = summary.loc[ping, "size"].astype(float)
    # time rising 0.1 ns a byte (10 GB/s): beta and the max-rate model are fitted
    rising = summary.copy()
    rising.loc[ping, "mean"] = base + 1e-10 * sizes
    fit = netparams.fit_file(write_frame(rising, tmp_path / "rising.csv"))
    hockney = fit["pingpong"]["openmpi"]
    assert hockney["alpha"] == pytest.approx(base, rel=1e-6)
    assert hockney["beta"] == pytest.approx(1e-10, rel=1e-6)
    assert fit["maxrate"]["R_b"] == pytest.approx(1e10, rel=1e-6)
    fb = fit["maxrate"]["provenance"]["fallbacks"]  # one machine: no network level
    assert fb["alpha, R_b"].startswith("network not measured")
    params = tmp_path / "rising.json"
    params.write_text(json.dumps(fit))
    out = harness("model", "smp", "--params", params, "--nodes", "2", "--ppn", "2",
                  "--size", "64KiB")
    assert out.returncode == 0, out.stderr
    assert f"alpha={fit['maxrate']['alpha']:g} s" in out.stdout
    # time falling with size: the slope is clamped to 0, so there is no R_b = 1/beta; the fit
    # says so and keeps the rest (test_a_fit_with_zero_beta_draws_every_figure: the figures)
    falling = summary.copy()
    falling.loc[ping, "mean"] = base * (2 - sizes / sizes.max())
    fit = netparams.fit_file(write_frame(falling, tmp_path / "falling.csv"))
    assert fit["pingpong"]["openmpi"]["beta"] == 0 and "maxrate" not in fit
    said = f"openmpi: the fitted beta at level {pp['level']} is 0"
    assert said in fit["provenance"]["maxrate_error"], fit["provenance"]
    with pytest.raises(ValueError, match=r"no 'maxrate' section \(its fit failed: "
                                         + re.escape(said)):
        maxrate.MaxRateParams.from_dict(fit)


def write_frame(df, path):
    df.to_csv(path, index=False)
    return path


def test_a_fit_with_zero_beta_draws_every_figure(tmp_path):
    """A ping-pong fit on sizes too close to resolve the bandwidth comes out with beta = 0
    (the fit clamps a negative slope): every Castelló figure and table is still written, and
    Fig. 1 says why this machine's curves are not drawn."""
    rows = pingpong("openmpi", pairs=(1, 2)) + reduce_local("openmpi")
    for alg, nat in cd.NATIVE["openmpi"].items():
        rows.append(dict(BASE, library="openmpi", algorithm=nat, procs=2, size=4096,
                         mean=2 * cd.variants(alg, 2, 4096, *LEVEL["network"], GAMMA)["THEO"],
                         params="{}", record="{}"))
    summary = write(rows, tmp_path / "summary.csv")
    doc = netparams.fit_file(summary)
    for fit in doc["pingpong"].values():
        fit["beta"] = 0.0
    pf = tmp_path / "model_params.json"
    pf.write_text(json.dumps(doc))
    written = cm.make(Inputs.of(summary, tmp_path / "tables", tmp_path / "fig", params=pf))
    for n in ("castello_fig1", "castello_fig2", "castello_fig3", "maxrate_fig5"):
        assert (tmp_path / "fig" / f"{n}.png").stat().st_size > 10_000
    assert {p.name for p in written} >= {"castello_models.md", "network_params.md"}
    assert "inf" in (tmp_path / "tables" / "network_params.md").read_text()
