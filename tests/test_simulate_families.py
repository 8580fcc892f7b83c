"""The other algorithm families on the simulated communicator (harness/simulate/comm.py,
collectives.py, arrival.py): SUARA (suara2, suara_l, three_step), PAP (prr, slt, with arrival
delays), node-aware (nap, smp) and the guideline mock-ups run unchanged, every rank's result
verified; shm is refused; a delayed PAP cell's time follows the injected delay."""

import pytest

from harness.simulate import loader
from harness.simulate.cell import SimulationError, simulate_sizes
from harness.simulate.platform import Platform

MISSING = loader.available()
needs_simgrid = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))

PAIRS = (("float64", "sum"), ("int32", "max"))
COUNTS = (5, 1001)  # below P (fallbacks) and not a multiple of any P here


def platform(procs: int, per_node: int) -> Platform:
    return Platform(nodes=-(-procs // per_node), cores_per_node=per_node)


def run(algorithm, procs, per_node, dtype, op, params=None, **kw):
    itemsize = 8 if dtype.endswith("64") else 4
    return simulate_sizes(algorithm, procs, [c * itemsize for c in COUNTS], dtype, op,
                          platform(procs, per_node), params=params or {}, calls=2, **kw)


def assert_ok(sims):
    assert [s.ok for s in sims] == [True] * len(sims), [(s.size, s.wrong_ranks) for s in sims]
    assert all(s.time > 0 for s in sims)


CASES = [
    # SUARA: explicit grids, the model's best grid with Open MPI's algorithms forced per
    # dimension (native:<name>), native sub-allreduces, a prime P (grid 1 x P)
    ("suara2", 12, 4, {"grid": "3x4"}),
    ("suara2", 12, 4, {"grid": "best-grid", "subs": "native"}),
    ("suara2", 6, 2, {"grid": "2x3", "row": "native", "col": "native"}),
    ("suara2", 7, 4, {}),
    ("suara_l", 12, 4, {"grid": "2x3x2"}),
    ("three_step", 12, 4, {}),
    ("three_step", 7, 2, {"col": "ring"}),
    ("three_step", 6, 2, {"grid": "3x2"}),
    # node-aware: the node of a rank is its host
    ("nap", 12, 4, {}),
    ("nap", 6, 2, {"intra": "shm"}),
    ("nap", 7, 1, {}),
    ("smp", 7, 4, {}),
    ("smp", 12, 4, {"intra": "shm"}),
    ("smp", 6, 1, {"layout": "emulated", "ppn": 3}),
    # PAP without delays (every rank at once)
    ("prr", 7, 2, {}),
    ("slt", 12, 4, {}),
    # the guideline mock-ups: the simulated Reduce, Bcast, Reduce_scatter, Allgatherv, Allreduce
    ("reduce_bcast", 7, 2, {}),
    ("reduce_scatter_allgather", 12, 4, {}),
    ("allreduce_halves", 6, 2, {}),
]


@needs_simgrid
@pytest.mark.parametrize("dtype, op", PAIRS)
@pytest.mark.parametrize("algorithm, procs, per_node, params", CASES)
def test_family_runs_unchanged_and_right(algorithm, procs, per_node, params, dtype, op):
    assert_ok(run(algorithm, procs, per_node, dtype, op, params))


@needs_simgrid
def test_what_the_algorithms_record():
    """nap's layout is the hosts (source 'simulated'); SUARA's native:<name> is forced by the
    simulated communicator; prr's tau is measured in simulated time."""
    nap, = simulate_sizes("nap", 12, [8008], platform=platform(12, 4))
    assert nap.record["layout_source"] == "simulated" and nap.record["n_nodes"] == 3
    assert nap.record["node_names"] == ["node-0", "node-1", "node-2"] and nap.record["ppn"] == 4
    suara, = simulate_sizes("suara2", 12, [8008], platform=platform(12, 4),
                            params={"grid": "best-grid", "subs": "native"})
    assert suara.ok and suara.record["row_forcing"] == suara.record["col_forcing"] == "simulated"
    assert suara.record["row"].startswith("native:")
    prr, = simulate_sizes("prr", 6, [8008], platform=platform(6, 2))
    assert prr.record["tau_source"] == "measured" and 1e-7 < prr.record["tau"] < 1e-4


@needs_simgrid
def test_native_allreduce_follows_mpichs_rule():
    """allreduce_halves = two native Allreduce calls: recursive doubling (3 messages per call
    at P = 8) at most 2048 bytes per call, Rabenseifner (6) above; native= forces one
    algorithm (the ring: 2 (P - 1) per call). Messages count per simulation."""
    small, = simulate_sizes("allreduce_halves", 8, [4096], platform=platform(8, 2))
    large, = simulate_sizes("allreduce_halves", 8, [4096 + 16], platform=platform(8, 2))
    assert small.ok and large.ok and small.messages == [6] * 8 and large.messages == [12] * 8
    ring, = simulate_sizes("allreduce_halves", 8, [1 << 16], platform=platform(8, 2), native="ring")
    assert ring.ok and ring.native == "ring" and ring.messages == [28] * 8


@needs_simgrid
def test_delays_shift_the_pap_cells_as_the_bench_counts_them():
    """Rank 3 of 7 arrives d late (one-late), reductions charged: each rank's time counts
    from its own arrival, so the early ranks wait for it and the cell's time (the slowest
    rank's) grows by exactly the added delay once the late rank dominates; the span (first
    arrival to last return) is that time. Told the arrivals (knowledge oracle), SLT and PRR
    leave the late rank less to do than in rank order (knowledge none) and than without
    delay."""
    procs, late, ds = 7, 3, (0.0, 2e-4, 1e-3)
    delays = [[d if r == late else 0.0 for r in range(procs)] for d in ds]
    kw = dict(platform=platform(procs, 2), reduce_rate=1e9, calls=3, delays=delays)
    for algorithm in ("prr", "slt"):
        told, = simulate_sizes(algorithm, procs, [8 * 7003], params={"knowledge": "oracle"}, **kw)
        blind, = simulate_sizes(algorithm, procs, [8 * 7003], params={"knowledge": "none"}, **kw)
        for sim in (told, blind):
            assert sim.ok and sim.delays == delays
            slowest = [max(t) for t in sim.all_times]
            assert slowest[2] - slowest[1] == pytest.approx(ds[2] - ds[1], rel=1e-6)
            assert sim.spans == pytest.approx(slowest, rel=1e-12)
            for d, span, times in zip(ds, sim.spans, sim.all_times):
                assert span >= d + times[late] - 1e-12
        assert told.all_times[2][late] < blind.all_times[2][late] < told.all_times[0][late], algorithm


def test_what_is_refused():
    with pytest.raises(ValueError, match="knowledge=online: the monitor thread .* is not simulated"):
        simulate_sizes("prr", 4, [64], params={"knowledge": "online"})
    with pytest.raises(ValueError, match="ring reads no arrival times"):
        simulate_sizes("ring", 4, [64], params={"knowledge": "oracle"})
    with pytest.raises(ValueError, match=r"delays: expected 2 vectors \(one per call\) of 4 seconds"):
        simulate_sizes("prr", 4, [64], calls=2, delays=[[0, 0, 0, 0]])
    with pytest.raises(ValueError, match="native 'tuned'"):
        simulate_sizes("ring", 4, [64], native="tuned")


@needs_simgrid
def test_shm_is_refused_with_what_is_missing():
    with pytest.raises(SimulationError, match=r"NotImplementedError: shm: shared-memory windows "
                                              r"\(MPI.Win.Allocate_shared"):
        simulate_sizes("shm", 4, [8000], platform=platform(4, 4))
