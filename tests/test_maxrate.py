"""The max-rate model of RD, SMP and NAP (``harness/models/maxrate.py``, Bienz et al. eqs. 3-6) and
``harness model rd|smp|nap``."""

import math
import re

import pytest
from conftest import harness

from harness.models.maxrate import MaxRateParams, cost, injection_time
from harness.units import format_time

P0 = MaxRateParams.defaults()


def test_without_injection_limit_rd_equals_smp():
    """When ppn processes together stay under the node's injection rate (R_N >= ppn R_b),
    eq. 3's injection term is s/R_b and eq. 4 (RD) is eq. 5 (SMP)."""
    p = MaxRateParams.from_dict({"R_N": 16 * P0.R_b})
    for nodes, ppn, s in [(16, 4, 8), (64, 16, 2048), (5, 3, 1 << 20)]:
        assert cost("rd", nodes, ppn, s, p).total == pytest.approx(cost("smp", nodes, ppn, s, p).total)


def test_injection_limit_favours_smp_by_the_formula():
    """Injection-limited: RD's inter-node messages cost ppn s / R_N each, SMP's s / R_b."""
    p = MaxRateParams.from_dict({"R_N": 2 * P0.R_b})
    nodes, ppn, s = 16, 8, 1 << 20
    rd, smp = cost("rd", nodes, ppn, s, p), cost("smp", nodes, ppn, s, p)
    assert injection_time(s, ppn, p) == pytest.approx(ppn * s / p.R_N)
    assert rd.total - smp.total == pytest.approx(math.log2(nodes) * s * (ppn / p.R_N - 1 / p.R_b))


@pytest.mark.parametrize("ppn,k", [(2, 5), (4, 3), (16, 2)])
def test_nap_step_counts_at_powers_of_ppn(ppn, k):
    nodes = ppn ** k
    c = cost("nap", nodes, ppn, 8, P0)
    assert c.inter_steps == pytest.approx(k)
    assert c.intra_steps == pytest.approx(math.log2(nodes * ppn))
    assert c.compute_steps == pytest.approx(math.log2(nodes * ppn) + k)
    rd = cost("rd", nodes, ppn, 8, P0)
    assert rd.inter_steps == pytest.approx(math.log2(nodes)) and rd.intra_steps == pytest.approx(math.log2(ppn))


def test_paper_shape_small_vs_large_messages():
    """Figs. 10-11: at 32768 processes (16 per node) NAP is cheapest for one value per
    process, SMP for large messages."""
    small = {a: cost(a, 2048, 16, 8, P0).total for a in ("rd", "smp", "nap")}
    large = {a: cost(a, 2048, 16, 1 << 20, P0).total for a in ("rd", "smp", "nap")}
    assert min(small, key=small.get) == "nap"
    assert min(large, key=large.get) == "smp"


def test_ceil_steps_for_other_node_counts():
    assert cost("nap", 9, 4, 8, P0, steps="ceil").inter_steps == 2
    assert cost("nap", 9, 4, 8, P0).inter_steps == pytest.approx(math.log(9, 4))
    assert cost("rd", 12, 4, 8, P0, steps="ceil").inter_steps == 4
    assert cost("nap", 1, 4, 8, P0).inter == 0


def test_bad_parameters_name_the_key():
    with pytest.raises(ValueError, match=r"unknown max-rate parameter\(s\) 'beta'; expected keys"):
        MaxRateParams.from_dict({"beta": 1e-9})
    with pytest.raises(ValueError, match=r"R_N: expected a positive finite number, got 0"):
        MaxRateParams.from_dict({"R_N": 0})
    with pytest.raises(ValueError, match=r"ppn: NAP needs ppn >= 2"):
        cost("nap", 4, 1, 8, P0)
    with pytest.raises(ValueError, match=r"algorithm: expected one of rd, smp, nap, got 'ring'"):
        cost("ring", 4, 4, 8, P0)


def test_cli_prints_the_model(tmp_path):
    out = harness("model", "nap", "--procs", "1024", "--ppn", "16", "--size", "8B",
                  "--alpha", "3e-6", "--rn", "2e10")
    assert out.returncode == 0, out.stderr
    p = MaxRateParams.from_dict({"alpha": 3e-6, "R_N": 2e10})
    want = cost("nap", 64, 16, 8, p)
    assert f"predicted   {format_time(want.total)}" in out.stdout
    assert "eq. 6" in out.stdout and "64 node(s) x 16" in out.stdout
    assert f"RD {format_time(cost('rd', 64, 16, 8, p).total)}" in out.stdout
    params = tmp_path / "p.json"
    params.write_text('{"alpha_l": 1e-6, "gamma": 0}')
    out = harness("model", "smp", "--nodes", "8", "--ppn", "4", "--size", "2KiB", "--params", params)
    assert out.returncode == 0, out.stderr
    want = cost("smp", 8, 4, 2048, MaxRateParams.from_dict({"alpha_l": 1e-6, "gamma": 0}))
    assert f"predicted   {format_time(want.total)}" in out.stdout


@pytest.mark.parametrize("args,pattern", [
    (["--procs", "10", "--ppn", "4", "--size", "8B"], r"argument --procs: P=10 is not a multiple of --ppn 4"),
    (["--procs", "8", "--ppn", "4", "--size", "8B", "--rb", "-1"], r"argument --rb: .*R_b.*got -1"),
    (["--procs", "8", "--ppn", "1", "--size", "8B"], r"argument --ppn: NAP needs ppn >= 2"),
    (["--ppn", "4", "--size", "8B"], r"exactly one of --procs and --nodes"),
])
def test_cli_bad_input_is_one_line(args, pattern):
    out = harness("model", "nap", *args)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert re.search(pattern, out.stderr), out.stderr
