"""Unit tests of harness.models (Hockney models of Open MPI allreduce, SUARA2 selection)."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from harness import models
from harness.analysis.vocabulary import timed_mask
from harness.models import (
    ALL6,
    Params,
    analytical_formula,
    basis,
    brute_force_suara2,
    coefficients,
    cost,
    decide_suara2,
    divisors,
    fit,
    fit_all,
    fit_gamma,
    measure_gamma,
    padded_grid,
    select_suara2,
    suara2_cost,
)

PP = Params.paper()
A, B, G, MS = 1.5e-6, 6.25e-11, 2e-10, 8192  # Table 4, m_s = 8 KiB
MiB = 1 << 20


def rel(x, y):
    return abs(x - y) / abs(y)


def test_paper_params():
    assert PP.gamma == G and PP.m_s == MS
    assert set(PP.ab) == set(ALL6)
    for a in ALL6:
        assert PP.ab[a] == (A, B)
    assert "rs" in PP.provenance["measured"]


# ---------------------------------------------------------------- cost formulas by hand

@pytest.mark.parametrize("P,m", [(2, 1024), (8, 4 * MiB), (16, 65536), (12, 3 * MiB)])
def test_linear_eq3(P, m):
    hand = (P - 1) * (2 * (A + B * m) + G * m)
    assert rel(cost("linear", P, m, PP), hand) < 1e-12


def test_linear_by_numbers():
    # P = 4, m = 1000: 3 * (2*(1.5e-6 + 6.25e-8) + 2e-7) = 3 * (3.125e-6 + 2e-7) = 9.975e-6
    assert cost("linear", 4, 1000, PP) == pytest.approx(9.975e-6, rel=1e-12)


@pytest.mark.parametrize("P,m", [(2, 1024), (8, 4 * MiB), (64, 65536)])
def test_rd_eq5(P, m):
    hand = math.log2(P) * (A + m * B + m * G)
    assert rel(cost("rd", P, m, PP), hand) < 1e-12


def test_rd_P8_by_numbers():
    m = 4 * MiB
    # log2(8) = 3: 3 * (1.5e-6 + 4194304*6.25e-11 + 4194304*2e-10)
    hand = 3 * (1.5e-6 + 4194304 * 6.25e-11 + 4194304 * 2e-10)
    assert cost("rd", 8, m, PP) == pytest.approx(hand, rel=1e-12)
    assert cost("rd", 8, m, PP) == pytest.approx(3 * (1.5e-6 + 2.62144e-4 + 8.388608e-4), rel=1e-12)


@pytest.mark.parametrize("P,m", [(2, 1024), (8, 4 * MiB), (12, 3 * MiB)])
def test_rnos_eq6(P, m):
    hand = 2 * (P - 1) * A + 2 * (P - 1) / P * B * m + (P - 1) / P * G * m
    assert rel(cost("rnos", P, m, PP), hand) < 1e-12


@pytest.mark.parametrize("P,m", [(2, 1024), (8, 4 * MiB), (12, 3 * MiB), (256, 52 * MiB)])
def test_rs_eq7(P, m):
    hand = (P + m / (MS * P) - 2) * (A + B * MS + G * MS) + (P - 1) * (A + B * m / P)
    assert rel(cost("rs", P, m, PP), hand) < 1e-12


def test_rs_P16_by_numbers():
    # m = 4 MiB, P = 16: segments term 16 + 4194304/(8192*16) - 2 = 16 + 32 - 2 = 46
    # per segment: 1.5e-6 + 8192*6.25e-11 + 8192*2e-10 = 1.5e-6 + 5.12e-7 + 1.6384e-6 = 3.6504e-6
    # ring term: 15 * (1.5e-6 + 6.25e-11 * 262144) = 15 * (1.5e-6 + 1.6384e-5) = 15 * 1.7884e-5
    hand = 46 * 3.6504e-6 + 15 * 1.7884e-5
    assert cost("rs", 16, 4 * MiB, PP) == pytest.approx(hand, rel=1e-12)


@pytest.mark.parametrize("P,m", [(2, 1024), (8, 4 * MiB), (64, 65536), (12, 3 * MiB)])
def test_rab_eq8(P, m):
    hand = 2 * math.log2(P) * A + 2 * (P - 1) / P * B * m + (P - 1) / P * G * m
    assert rel(cost("rab", P, m, PP), hand) < 1e-12


@pytest.mark.parametrize("P,m", [(2, 1024), (8, 4 * MiB), (12, 3 * MiB)])
def test_nono_choice(P, m):
    # our choice (eq. 4 has no printed formula): binomial reduce + binomial bcast
    L = math.log2(P)
    hand = L * (A + B * m + G * m) + L * (A + B * m)
    assert rel(cost("nono", P, m, PP), hand) < 1e-12


@pytest.mark.parametrize("alg", ALL6)
def test_P1_costs_nothing(alg):
    assert cost(alg, 1, 4 * MiB, PP) == 0.0
    assert cost(alg, 1, 0, PP) == 0.0


def test_unknown_algorithm():
    with pytest.raises(ValueError, match=r"unknown algorithm 'bogus'; expected one of "):
        cost("bogus", 4, 1024, PP)


def test_per_algorithm_parameters_used():
    p = Params(ab={"rd": (1e-5, 1e-9), "rs": (A, B)}, gamma=G)
    assert cost("rd", 4, 100, p) == pytest.approx(2 * (1e-5 + 1e-9 * 100 + G * 100))
    with pytest.raises(KeyError, match=r"no \(alpha, beta\) for algorithm 'rab'; have \['rd', 'rs'\]"):
        cost("rab", 4, 100, p)


# ---------------------------------------------------------------- SUARA2 model

def test_suara2_eq9():
    m = 4 * MiB
    assert suara2_cost("rs", "rab", 12, 3, m, PP) == pytest.approx(cost("rs", 3, m, PP) + cost("rab", 4, m, PP))
    # endpoints: a one-process sub-allreduce costs nothing
    assert suara2_cost("rs", "rab", 12, 12, m, PP) == cost("rs", 12, m, PP)
    assert suara2_cost("rs", "rab", 12, 1, m, PP) == cost("rab", 12, m, PP)


def test_suara2_eq13_rs_rs_at_sqrtP():
    P, m = 64, 4 * MiB
    r = 8
    hand = 2 * (A + B * MS + G * MS) * (r + m / (MS * r) - 2) + 2 * (r - 1) * (A + B * m / r)
    assert suara2_cost("rs", "rs", P, 8, m, PP) == pytest.approx(hand, rel=1e-12)


def test_divisors():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(16) == [1, 2, 4, 8, 16]
    assert divisors(13) == [1, 13]
    assert divisors(1) == [1]


def _check_choice(P, m, params):
    ch = select_suara2(P, m, params)
    assert ch.P_r * ch.P_c == P and P % ch.P_c == 0
    assert len(ch.table) == 36
    for c in ch.table:
        assert P % c.P_c == 0 and c.P_r * c.P_c == P
        assert ch.time <= c.time * (1 + 1e-12)
    assert ch.time <= ch.best_single_time * (1 + 1e-12)
    assert ch.speedup == pytest.approx(ch.best_single_time / ch.time)
    # equals brute force over all divisors x all 36 combinations
    bf = brute_force_suara2(P, m, params)
    assert len(bf) == 36 * len(divisors(P))
    assert ch.time == pytest.approx(bf[0][0], rel=1e-12)
    best_set = {(ar, ac, pc) for t, ar, ac, pc in bf if t <= bf[0][0] * (1 + 1e-12)}
    if ch.fallback is None:
        assert (ch.a_r, ch.a_c, ch.P_c) in best_set
    # best proper grid equals brute force over proper divisors
    proper = [r for r in bf if 1 < r[3] < P]
    if proper:
        assert ch.best_grid is not None and 1 < ch.best_grid.P_c < P and P % ch.best_grid.P_c == 0
        assert ch.best_grid.time == pytest.approx(proper[0][0], rel=1e-12)
        for c in ch.grid_table:
            assert ch.best_grid.time <= c.time * (1 + 1e-12)
    return ch


@pytest.mark.parametrize("P", [12, 16])
@pytest.mark.parametrize("m", [8, 64 * 1024, 4 * MiB, 52 * MiB])
def test_select_paper_params(P, m):
    _check_choice(P, m, PP)


@pytest.mark.parametrize("P", [4, 6, 8, 9, 12, 16, 18, 24, 36, 64, 100, 256, 1024])
def test_select_equals_brute_force(P):
    for m in (4096, 1 * MiB, 4 * MiB, 64 * MiB):
        _check_choice(P, m, PP)


def test_select_brute_force_heterogeneous_params():
    # algorithm-specific (alpha, beta) so that mixed combinations matter
    p = Params(ab={"linear": (2e-6, 3e-10), "nono": (3e-6, 9e-11), "rd": (1e-6, 2e-10),
                   "rnos": (4e-6, 5e-11), "rs": (1.5e-6, 6.25e-11), "rab": (8e-6, 7e-11)},
               gamma=2e-10, m_s=8192)
    for P in (6, 12, 16, 30, 48, 64, 210, 256):
        for m in (1024, 256 * 1024, 4 * MiB, 32 * MiB):
            _check_choice(P, m, p)


def test_large_P_prefers_rs_sqrt_grid():
    ch = select_suara2(1024, 4 * MiB, PP)
    assert ch.fallback is None
    assert (ch.a_r, ch.a_c, ch.P_r, ch.P_c) == ("rs", "rs", 32, 32)
    assert ch.speedup > 1


@pytest.mark.parametrize("P", [2, 3, 5, 7, 13, 97])
def test_prime_fallback(P):
    ch = select_suara2(P, 4 * MiB, PP)
    assert ch.fallback == "no-grid"
    assert ch.best_grid is None
    assert (ch.P_r, ch.P_c) == (1, P)
    assert ch.a_r == ch.a_c == ch.best_single
    assert ch.time == ch.best_single_time
    assert ch.time == min(cost(a, P, 4 * MiB, PP) for a in ALL6)
    assert ch.speedup == 1.0


def test_padded_grid():
    pg = padded_grid(13, 4 * MiB, PP)
    assert pg.Q > 13 and len(divisors(pg.Q)) > 2
    assert pg.time == pg.choice.best_grid.time
    if not pg.useful:
        assert pg.Q == 14  # smallest composite
    pg = padded_grid(251, 4 * MiB, PP, max_Q=300)
    assert pg.useful and pg.Q > 251
    assert pg.time < min(cost(a, 251, 4 * MiB, PP) for a in ALL6)


def test_choice_table_frame():
    df = select_suara2(16, 4 * MiB, PP).table_frame()
    assert len(df) == 36 and df["time"].is_monotonic_increasing


def test_rs_rs_closed_form_stationary_point():
    ch = select_suara2(256, 4 * MiB, PP)
    (c,) = [c for c in ch.table if c.a_r == "rs" and c.a_c == "rs"]
    assert c.method == "closed-form"
    assert any(abs(s - 16.0) < 1e-9 for s in c.stationary)
    i = [abs(s - 16.0) < 1e-9 for s in c.stationary].index(True)
    assert c.curvature[i] > 0  # A_1' > 0: a minimum


# ---------------------------------------------------------------- fitting

def _synthetic(alg, alpha, beta, gamma=G, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    p = Params(ab={alg: (alpha, beta)}, gamma=gamma)
    rows = []
    for P in (2, 4, 8, 12, 16, 32, 64):
        for m in (8, 64, 512, 4096, 32768, 262144, 1 << 21, 1 << 23):
            t = cost(alg, P, m, p) * (1 + noise * rng.standard_normal())
            rows.append({"algorithm": f"native:{alg}", "procs": P, "size": m, "mean": t, "status": "ok"})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("alg", ALL6)
def test_fit_recovers_alpha_beta(alg):
    alpha, beta = 3.1e-6, 8.7e-11
    df = _synthetic(alg, alpha, beta, seed=ALL6.index(alg))
    a, b, r2, n = fit(df, alg, gamma=G, m_s=MS)
    assert n == len(df)
    assert rel(a, alpha) < 0.05, (a, alpha)
    assert rel(b, beta) < 0.05, (b, beta)
    assert r2 > 0.99


def test_fit_of_the_timed_rows_ignores_bad_status_and_P1():
    """The rows a fit sees are the summary's timed ones (harness.analysis.fit chooses them by
    the vocabulary's timed_mask); P = 1 rows the fit drops itself."""
    df = _synthetic("rs", 1.5e-6, 6.25e-11)
    bad = df.head(5).copy()
    bad["mean"] = 10.0
    bad["status"] = "wrong"
    one = df.head(3).copy()
    one["procs"] = 1
    rows = pd.concat([df, bad, one])
    a, b, _r2, n = fit(rows[timed_mask(rows)], "rs", gamma=G, m_s=MS)
    assert n == len(df)
    assert rel(a, 1.5e-6) < 0.05 and rel(b, 6.25e-11) < 0.05


def test_fit_all():
    df = pd.concat([_synthetic("rs", 1.5e-6, 6.25e-11, seed=1), _synthetic("rnos", 4e-6, 5e-11, seed=2)])
    df["algorithm"] = df["algorithm"].replace({"native:rnos": "ring"})
    p = fit_all(df, {"native:rs": "rs", "ring": "rnos"}, gamma=G, provenance={"campaign": "synthetic"})
    assert set(p.ab) == {"rs", "rnos"}
    assert rel(p.alpha("rs"), 1.5e-6) < 0.05 and rel(p.beta("rs"), 6.25e-11) < 0.05
    assert rel(p.alpha("rnos"), 4e-6) < 0.05 and rel(p.beta("rnos"), 5e-11) < 0.05
    assert p.provenance["campaign"] == "synthetic"
    assert p.provenance["fits"]["rs"]["r2"] > 0.99
    # a selection restricted to the fitted algorithms works
    ch = select_suara2(64, 4 * MiB, p)
    assert {c.a_r for c in ch.table} == {"rs", "rnos"}


def test_fit_gamma():
    sizes = np.array([1e3, 1e4, 1e5, 1e6])
    assert fit_gamma(sizes, 5e-7 + 3e-10 * sizes) == pytest.approx(3e-10, rel=1e-9)


def test_measure_gamma():
    g = measure_gamma(sizes=(1 << 16, 1 << 18, 1 << 20), reps=3)
    assert 0 < g < 1e-7  # s/B: anything from ~1 TB/s down to 10 MB/s


# ---------------------------------------------------------------- serialisation

def test_params_roundtrip():
    p = PP
    d = json.loads(json.dumps(p.to_dict()))
    q = Params.from_dict(d)
    assert q == p
    assert q.provenance == json.loads(json.dumps(models.plain_json(dict(p.provenance))))
    p2 = Params(ab={"rs": (1e-6, 2e-10)}, gamma=1e-10, m_s=4096,
                provenance={"source": "fit", "date": "2026-11-23", "campaign": "c1",
                            "fits": {"rs": {"r2": np.float64(0.98), "n": np.int64(12)}}})
    q2 = Params.from_dict(json.loads(json.dumps(p2.to_dict())))
    assert q2 == p2 and q2.provenance["fits"]["rs"]["n"] == 12


# ---------------------------------------------------------------- fast decision, eq. (11) reading

@pytest.mark.parametrize("P", [1, 2, 3, 4, 6, 12, 13, 16, 36, 97, 100, 1024, 4096])
@pytest.mark.parametrize("m", [8, 4096, 256 * 1024, 4 * MiB, 64 * MiB])
def test_decide_equals_select(P, m):
    ch = select_suara2(P, m, PP)
    d = decide_suara2(P, m, PP)
    assert d[:4] == (ch.a_r, ch.a_c, ch.P_r, ch.P_c) and d[5] == ch.fallback
    assert d[4] == pytest.approx(ch.time, rel=1e-12)


@pytest.mark.parametrize("alg", ALL6)
def test_basis_is_table1(alg):
    for n in (2, 3, 7, 16, 100):
        for m in (8, 5000, 4 * MiB):
            c0, c1, c2, c3 = basis(alg, 100, m, PP)
            A, B, Gc = coefficients(alg, n, m, PP.m_s)
            want = PP.alpha(alg) * A + PP.beta(alg) * B + PP.gamma * Gc
            assert c0 + c1 * n + c2 / n + c3 * math.log2(n) == pytest.approx(want, rel=1e-12)


def _a1(P, m, p):  # eq. (11) as printed
    al, be = p.ab["rs"]
    return 2 * al + be * p.m_s + p.gamma * p.m_s - be * m / P


@pytest.mark.parametrize("P", [16, 24, 36, 60, 1024])
def test_rs_rs_with_a1_positive_picks_the_divisor_nearest_sqrt_p(P):
    """Eq. (11)-(12) by hand, the paper's reading (segments over all P): for m with
    A_1 > 0 the (rs, rs) formula returns floor or ceil of sqrt(P) among the divisors."""
    p = Params.paper(rs_segments="global")
    m = 64 * 1024
    assert _a1(P, m, p) > 0
    c = analytical_formula("rs", "rs", P, m, p, endpoints=False)
    divs = divisors(P)
    below = max(d for d in divs if d <= math.sqrt(P))
    above = min(d for d in divs if d >= math.sqrt(P))
    assert c.P_c in (below, above)
    by_hand = min((suara2_cost("rs", "rs", P, d, m, p), d) for d in (below, above))[1]
    assert c.P_c == by_hand
    full = analytical_formula("rs", "rs", P, m, p)
    assert any(abs(s - math.sqrt(P)) < 1e-9 for s in full.stationary)
    assert all(k > 0 for k in full.curvature)


@pytest.mark.parametrize("P", [16, 36, 1024])
def test_rs_rs_with_a1_not_positive_picks_a_linear_arrangement(P):
    """A_1 <= 0 (a large message in the eq. 11 reading): sqrt(P) is a maximum and the
    formula returns an endpoint, the linear arrangement (1, P)."""
    p = Params.paper(rs_segments="global")
    m = 2 * P * (2 * p.ab["rs"][0] + (p.ab["rs"][1] + p.gamma) * p.m_s) / p.ab["rs"][1]
    assert _a1(P, m, p) < 0
    c = analytical_formula("rs", "rs", P, m, p)
    assert (c.P_r, c.P_c) in ((1, P), (P, 1))
    i = [abs(s - math.sqrt(P)) < 1e-9 for s in c.stationary].index(True)
    assert c.curvature[i] < 0


def test_stage_reading_keeps_a1_positive_for_any_message():
    """Eqs. (7)+(9)+(13) (the default): A_1' = 2a + b m_s + g m_s + (a + g m_s) m/(m_s P) > 0,
    so sqrt(P) stays a minimum of (rs, rs) even where the eq. (11) reading has A_1 <= 0 (the
    endpoint may still win: a one-process stage costs nothing)."""
    P, m = 1024, 512 * MiB
    assert _a1(P, m, PP) < 0
    c = analytical_formula("rs", "rs", P, m, PP)
    i = [abs(s - 32) < 1e-9 for s in c.stationary].index(True)
    assert c.curvature[i] > 0
    assert (c.P_r, c.P_c) in ((1, P), (32, 32))
    g = analytical_formula("rs", "rs", P, m, PP, endpoints=False)
    assert (g.P_r, g.P_c) == (32, 32)


# ---------------------------------------------------------------- SUARA-L

def test_factorizations():
    from harness.models import factorizations
    assert factorizations(12, 3) == [(3, 2, 2)]
    assert sorted(factorizations(64, 3)) == [(4, 4, 4), (8, 4, 2), (16, 2, 2)]
    assert factorizations(13, 3) == [] and factorizations(8, 4) == []


def test_suara_l_is_the_cheapest_factorisation_by_brute_force():
    from itertools import product

    from harness.models import select_suara_l, stage_cost
    for P in (8, 27, 64, 1000, 4096):
        for m in (4096, 4 * MiB):
            c = select_suara_l(P, m, PP, 3)
            assert math.prod(c.dims) == P and len(c.dims) == 3
            brute = min(sum(stage_cost(a, d, P, m, PP) for a, d in zip(algs, dims))
                        for dims in product(divisors(P), repeat=3) if math.prod(dims) == P
                        and min(dims) >= 2 for algs in product(ALL6, repeat=3))
            assert c.time == pytest.approx(brute, rel=1e-12)
    c = select_suara_l(4096, 4 * MiB, PP, 3)
    assert c.dims == (16, 16, 16) and c.algs == ("rs",) * 3 and c.speedup > 1
    assert select_suara_l(13, 4 * MiB, PP, 3).fallback == "no-grid"


@pytest.mark.parametrize("P", [4, 6, 12, 13, 16, 1024])
def test_decide_grids_only_is_the_best_grid(P):
    ch = select_suara2(P, 4 * MiB, PP)
    d = decide_suara2(P, 4 * MiB, PP, grids_only=True)
    if ch.best_grid is None:
        assert d[5] == "no-grid"
    else:
        assert d[:4] == (ch.best_grid.a_r, ch.best_grid.a_c, ch.best_grid.P_r, ch.best_grid.P_c)
