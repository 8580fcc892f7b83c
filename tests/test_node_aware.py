"""NAP and SMP (``harness/algorithms/node_aware.py``), node layouts (``harness/layout.py``) and
message counting (``harness/measure/counting.py``).

Correctness: one MPICH launch of 36 ranks runs every emulated layout of 1..9 nodes x 1..4
processes per node (powers of ppn and not) with every dtype and op, plus the real layout; one
Open MPI launch checks a few layouts with the other library's op implementation.
Counts: the largest number of inter-node messages one rank sends per call, at 16 nodes x 4
(64 ranks, the bench's counting function in a light script) and at 4 nodes x 4 (a run through
the bench, recorded with the cell)."""

import json
import math
import os
import re
import sys

import pytest
from conftest import FAST, REPO, execute_run, fast_settings, harness, run_mpi
from mpi_check_support import THROTTLE, check_algorithms
from requirements_support import require_mpi

from harness import layout
from harness.algorithms import REGISTRY
from harness.algorithms.node_aware_schedules import nap_groups, nap_step_pattern, nap_steps
from harness.cells import Cell

MPICH = REPO / ".mpi" / "mpich"
MPICH_ENV = {"MPI4PY_LIBMPI": str(MPICH / "lib" / "libmpi.so.12"), **THROTTLE["mpich"]}


def test_every_emulated_layout_up_to_9_nodes_by_4_mpich():
    check_algorithms("mpich", 36, "node-aware", 9, 4)


def test_layouts_openmpi():
    check_algorithms("openmpi", 6, "node-aware", 3, 3)


# --------------------------------------------------------------------------- message counts

def _counted(results_root, monkeypatch, nodes, ppn, algorithms):
    """Run ``algorithms`` at ``nodes`` x ``ppn`` emulated, 8 B (one double); return
    {algorithm: record}."""
    for k, v in THROTTLE["mpich"].items():
        monkeypatch.setenv(k, v)
    params = (("layout", "emulated"), ("ppn", ppn))
    cells = [Cell("mpich", a, nodes * ppn, 8, params=params) for a in algorithms]
    outcome, doc, _ = execute_run(results_root, "mpich", cells,
                                  settings=fast_settings(min_reps=2, max_reps=3), timeout=480)
    assert outcome == "complete", doc
    out = {}
    for entry in doc["cells"]:
        assert entry["status"] in ("ok", "not-converged"), entry
        out[entry["cell"]["algorithm"]] = entry["record"]
    return out


def _check_counts(rec, nodes, ppn, nap_inter, rd_inter):
    nap, rd, smp = rec["nap"], rec["recursive_doubling"], rec["smp"]
    # the numbers, and the formulas they come from
    assert nap["inter_msgs"] == nap_inter == math.ceil(round(math.log(nodes, ppn), 9))
    assert rd["inter_msgs"] == rd_inter == int(math.log2(nodes))
    assert nap["inter_msgs_recv"] == nap_inter and rd["inter_msgs_recv"] == rd_inter
    # one double per message
    assert nap["inter_bytes"] == 8 * nap_inter and rd["inter_bytes"] == 8 * rd_inter
    # NAP trades them for intra-node messages: log2(ppn) in each of its steps + 1 local allreduces
    assert nap["intra_msgs"] == int(math.log2(ppn)) * (nap_inter + 1)
    assert rd["intra_msgs"] == int(math.log2(ppn))
    # SMP: only the masters talk between nodes, log2(n) times; reduce + bcast inside the node
    assert smp["inter_msgs"] == rd_inter
    assert smp["inter_msgs_total"] == nodes * rd_inter
    assert rd["inter_msgs_total"] == nodes * ppn * rd_inter
    for r in rec.values():
        assert r["collectives"] == 0


def test_inter_node_messages_16_nodes_by_4():
    """16 emulated nodes x 4 (64 ranks): NAP sends at most 2 inter-node messages per rank and
    call, RD 4 (a light script calling the bench's counting function, so 64 ranks start fast)."""
    require_mpi("mpich")
    proc = run_mpi([str(MPICH / "bin" / "mpiexec"), "-n", "64", sys.executable,
                    str(REPO / "tests" / "mpi_count_messages.py"), "4", "nap",
                    "recursive_doubling", "smp"], capture_output=True, text=True, timeout=480,
                   env={**os.environ, **MPICH_ENV}, cwd=REPO)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    _check_counts(json.loads(proc.stdout.strip().splitlines()[-1]), 16, 4, 2, 4)


def test_inter_node_messages_4_nodes_by_4_recorded_by_the_bench(results_root, monkeypatch):
    """4 emulated nodes x 4 through the bench: 1 inter-node message per rank for NAP, 2 for
    RD, recorded with the cell together with its layout."""
    rec = _counted(results_root, monkeypatch, 4, 4, ["nap", "recursive_doubling", "smp"])
    _check_counts(rec, 4, 4, 1, 2)
    for r in rec.values():
        assert r["layout"] == "emulated" and r["ppn"] == 4 and r["n_nodes"] == 4
    assert rec["nap"]["inter_steps"] == 1


def test_counts_in_summary_and_record_of_other_algorithms(results_root):
    """``harness run --param layout=...`` counts any harness algorithm, e.g. SUARA2 whose rows
    and columns are sub-communicators: 2x3 grid over 3 emulated nodes of 2."""
    out = harness("run", "--library", "openmpi", "--algorithm", "suara2", "--param", "grid=3x2",
                  "--param", "row=recursive_doubling", "--param", "col=recursive_doubling",
                  "--param", "layout=emulated", "--param", "ppn=2", "--procs", "6",
                  "--size", "8B", *FAST)
    assert out.returncode == 0, out.stdout + out.stderr
    import pandas as pd

    row = pd.read_csv(results_root / "adhoc" / "summary.csv").iloc[0]
    rec = json.loads(row["record"])
    # rows are the emulated nodes (one intra message each), columns cross them (two rounds of
    # recursive doubling over 3 ranks: fold-in or exchange, then the result back)
    assert rec["P_r"] == 3 and rec["P_c"] == 2 and rec["layout"] == "emulated"
    assert rec["intra_msgs"] == 1 and rec["inter_msgs"] == 2
    assert rec["intra_msgs_total"] == 6


# --------------------------------------------------------------------------- layouts

def test_emulated_layout_blocks():
    lay = layout.emulated(12, 4)
    assert lay.n_nodes == 3 and lay.ppn == 4 and lay.blocked()
    assert lay.nodes[1] == (4, 5, 6, 7) and lay.node_of[7] == 1 and lay.local_rank(7) == 3


def test_real_layout_from_node_names_in_rank_order():
    lay = layout.from_keys(["n2", "n1", "n2", "n1"])
    assert lay.nodes == ((0, 2), (1, 3)) and lay.names == ("n2", "n1") and lay.ppn == 2
    assert not lay.blocked()
    assert layout.from_keys(["a", "a", "b"]).ppn is None


@pytest.mark.parametrize("params,message", [
    ({"layout": "mesh"}, "parameter layout: expected one of real, emulated, got 'mesh'"),
    ({"layout": "emulated"}, "parameter ppn: layout=emulated needs ppn"),
    ({"layout": "emulated", "ppn": "four"}, "parameter ppn: expected an integer >= 1, got 'four'"),
    ({"layout": "emulated", "ppn": 0}, "parameter ppn: expected an integer >= 1, got 0"),
    ({"layout": "real", "ppn": 2}, "parameter ppn: only layout=emulated takes ppn"),
])
def test_bad_layout_parameters(params, message):
    with pytest.raises(layout.LayoutError, match=re.escape(message)):
        layout.parse(params)


def test_ppn_must_divide_p():
    with pytest.raises(layout.LayoutError, match=r"ppn that divides P=10, got ppn=4"):
        layout.emulated(10, 4)


def test_bad_layout_is_a_usage_error(results_root):
    out = harness("run", "--library", "mpich", "--algorithm", "nap", "--param", "layout=emulated",
                  "--param", "ppn=3", "--procs", "4", "--size", "8B")
    assert out.returncode == 2 and not results_root.exists()
    assert "ppn" in out.stderr and "P=4" in out.stderr and out.stderr.count("\n") == 1


# --------------------------------------------------------------------------- NAP's grouping

@pytest.mark.parametrize("ppn", [2, 3, 4, 16])
def test_power_of_ppn_grouping_is_algorithm_1(ppn):
    """For n = ppn^k every step has groups of ppn equal subgroups of consecutive nodes, and
    local rank r of subgroup s, position pos, pairs with local rank s of subgroup r, same pos."""
    n = ppn ** 2
    groups = nap_groups(n, ppn)
    assert len(groups) == nap_steps(n, ppn) == 2
    for step, gs in enumerate(groups):
        sub = ppn ** step
        assert all(len(g) == ppn and all(length == sub for _, length in g) for g in gs)
        roles, feeds = nap_step_pattern(n, ppn, step)
        assert not feeds
        for (m, r), (role, peer) in roles.items():
            g_start = m // (sub * ppn) * sub * ppn
            s, pos = divmod(m - g_start, sub)
            if r == s:
                assert role == "own"
            else:
                assert (role, peer) == ("exchange", (g_start + r * sub + pos, s))


def test_fig8_twelve_nodes_by_four():
    """12 nodes x 4: the first step is the regular one, the second has 3 subgroups and local
    rank 3 sits idle."""
    first, second = nap_groups(12, 4)
    assert first == [[(0, 1), (1, 1), (2, 1), (3, 1)], [(4, 1), (5, 1), (6, 1), (7, 1)],
                     [(8, 1), (9, 1), (10, 1), (11, 1)]]
    assert second == [[(0, 4), (4, 4), (8, 4)]]
    roles, feeds = nap_step_pattern(12, 4, 1)
    assert all(roles[(m, 3)] == ("none", None) for m in range(12)) and not feeds


def test_fig9_ten_nodes_by_four():
    """10 nodes x 4: first-step groups of nearly equal size (4, 3, 3); node 3 (position 3) has
    no partner in subgroups 1 and 2 and receives their data from an idle process of theirs."""
    first, second = nap_groups(10, 4)
    assert [len(g) for g in first] == [4, 3, 3]
    assert second == [[(0, 4), (4, 3), (7, 3)]]
    roles, feeds = nap_step_pattern(10, 4, 1)
    kind, (src_node, src_rank) = roles[(3, 2)]
    assert kind == "receive" and 7 <= src_node <= 9 and src_rank in (2, 3)
    assert (3, 2) in feeds[(src_node, src_rank)]
    assert roles[(3, 1)][0] == "receive" and roles[(3, 0)] == ("own", None)


def test_registry_entries():
    assert {n for n, a in REGISTRY.items() if a.family == "node-aware"} == {"nap", "smp"}
    for name in ("nap", "smp"):
        assert REGISTRY[name].description and REGISTRY[name].fn.prepare


def test_no_rank_sends_more_than_ceil_log_ppn_n_inter_node_messages():
    """From the schedule itself: in every step a process exchanges with at most one other node
    or feeds nodes that lack a partner; summed over the steps, no process sends more than
    ceil(log_ppn n) inter-node messages, for every n <= 64 and ppn 2..8 (powers or not)."""
    worst = {}
    for ppn in range(2, 9):
        for n in range(1, 65):
            sent = {}
            for step in range(nap_steps(n, ppn)):
                roles, feeds = nap_step_pattern(n, ppn, step)
                for key, (role, _) in roles.items():
                    sent[key] = sent.get(key, 0) + (role == "exchange") + len(feeds.get(key, []))
            worst[(n, ppn)] = max(sent.values(), default=0)
            assert worst[(n, ppn)] <= nap_steps(n, ppn), (n, ppn, worst[(n, ppn)])
    assert worst[(16, 4)] == 2 and worst[(64, 4)] == 3 and worst[(10, 4)] == 2
