"""Simulated platforms (harness/simulate/, docs/simulation.md): the classic algorithms of
harness/algorithms/p2p.py run unchanged on SimGrid, their results checked as a measured
cell's are, their times against SMPI's own C algorithm of the same name on the same platform."""

import sys

import pytest

from harness.simulate import loader, smpi
from harness.simulate.cell import SimulationError, simulate_allreduce, simulate_sizes
from harness.simulate.platform import Platform

MISSING = loader.available() or smpi.available()
needs_simgrid = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))

MiB = 1 << 20

BROKEN = '''
from harness.algorithms import register
from harness.algorithms.p2p import ring


class SkipsOne:
    """The op, except that its second reduction does nothing."""

    def __init__(self, op):
        self.op, self.calls = op, 0

    def Reduce_local(self, inbuf, inoutbuf):
        self.calls += 1
        if self.calls != 2:
            self.op.Reduce_local(inbuf, inoutbuf)


@register("test:ring-skips-a-reduction", family="test")
def ring_skips_a_reduction(comm, sendbuf, recvbuf, op, ctx):
    ring(comm, sendbuf, recvbuf, SkipsOne(op) if comm.Get_rank() == 3 else op, ctx)


@register("test:polls", family="test")
def polls(comm, sendbuf, recvbuf, op, ctx):
    """A ring exchange polled with Test, then the harness's ring."""
    rank, size = comm.Get_rank(), comm.Get_size()
    comm.Barrier()
    recv = comm.Irecv(recvbuf, (rank - 1) % size, 5)
    send = comm.Isend(sendbuf, (rank + 1) % size, 5)
    while not recv.Test():
        pass
    recv.Waitall([send, recv])
    ring(comm, sendbuf, recvbuf, op, ctx)


@register("test:receives-from-nobody", family="test")
def receives_from_nobody(comm, sendbuf, recvbuf, op, ctx):
    comm.Recv(recvbuf, (comm.Get_rank() + 1) % comm.Get_size(), 7)


@register("test:raises-on-rank-2", family="test")
def raises_on_rank_2(comm, sendbuf, recvbuf, op, ctx):
    if comm.Get_rank() == 2:
        raise ValueError("rank 2 gives up")
    comm.Recv(recvbuf, (comm.Get_rank() + 1) % comm.Get_size(), 7)
'''


def within(sim: float, ref: float, rel: float) -> bool:
    return abs(sim - ref) <= rel * ref


def test_platform_file_and_placement():
    p = Platform(nodes=4, cores_per_node=2, latency=2e-6, bandwidth=1e9)
    xml = p.xml()
    assert 'radical="0-3"' in xml and 'core="2"' in xml
    assert 'lat="1e-06s"' in xml and 'bw="1000000000.0Bps"' in xml  # two links of latency / 2
    assert p.rank_hosts(5) == ["node-0", "node-0", "node-1", "node-1", "node-2"]
    assert p.hostfile(3) == "node-0\nnode-0\nnode-1\n"
    assert p.digest() == Platform(nodes=4, cores_per_node=2, latency=2e-6, bandwidth=1e9).digest()
    assert p.digest() != Platform(nodes=4, cores_per_node=2, latency=3e-6, bandwidth=1e9).digest()
    with pytest.raises(ValueError, match="9 ranks do not fit on 4 nodes of 2 cores"):
        p.rank_hosts(9)
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        Platform(nodes=2, bandwidth=0)


@needs_simgrid
@pytest.mark.parametrize("ours, theirs", [("recursive_doubling", "rdb"), ("ring", "lr")])
def test_p64_times_match_smpis_c_algorithm(ours, theirs):
    """At P = 64 the simulated harness algorithm and SMPI's C one of the same name take the
    same time (docs/simulation.md: equal to the last digit where the two do the same
    messages). 2 MiB + 8 bytes is 262145 elements, not a multiple of 64: SMPI's ring (lr) then
    sends the 1-element remainder in an allreduce of its own after the ring, which the harness's
    ring (Open MPI's: blocks one element longer) does not, so it is the slower, by 14 us."""
    sizes = [4096, 65536, MiB, 2 * MiB + 8]
    platform = Platform(nodes=64)
    sims = simulate_sizes(ours, 64, sizes, platform=platform)
    refs = smpi.smpi_allreduce(theirs, 64, sizes, platform=platform)
    for size, sim, ref in zip(sizes, sims, refs):
        assert sim.ok, (size, sim.wrong_ranks)
        assert within(sim.time, ref.time, 0.02), (size, sim.time, ref.time)
        assert within(min(sim.times), min(ref.times), 0.02), (size, sim.times, ref.times)
    if ours == "ring":
        assert sims[-1].time < refs[-1].time  # lr's separate remainder call


@needs_simgrid
@pytest.mark.parametrize("algorithm, dtype, op, theirs", [
    ("recursive_doubling", "int64", "prod", "rdb"),
    ("rabenseifner", "int32", "sum", "rab"),
    ("ring", "float32", "max", None),
])
def test_p12_results_right_and_times_match(algorithm, dtype, op, theirs):
    """P = 12 (not a power of two: the pre- and post-steps of recursive doubling and
    Rabenseifner), counts 0, 1 (< P: ring and Rabenseifner fall back to recursive doubling),
    513 (not a multiple of 12) and 16384: every rank's result right in two calls each."""
    itemsize = 8 if dtype == "int64" else 4
    sizes = [0, itemsize, 513 * itemsize, 16384 * itemsize]
    platform = Platform(nodes=3, cores_per_node=4)  # four ranks per node: loopback links too
    sims = simulate_sizes(algorithm, 12, sizes, dtype, op, platform, calls=2)
    assert [s.ok for s in sims] == [True] * 4, [(s.size, s.wrong_ranks) for s in sims]
    for s in sims:  # the second call as the first (to the rounding of a later clock)
        assert s.all_times[1] == pytest.approx(s.all_times[0], rel=1e-9, abs=1e-15)
    if theirs:
        refs = smpi.smpi_allreduce(theirs, 12, sizes[2:], dtype, op, platform)
        for sim, ref in zip(sims[2:], refs):
            assert within(sim.time, ref.time, 0.02), (sim.size, sim.time, ref.time)


@needs_simgrid
def test_a_broken_reduction_is_caught_as_wrong(tmp_path):
    plugin = tmp_path / "broken.py"
    plugin.write_text(BROKEN)
    good, = simulate_sizes("ring", 8, [8192], plugins=[plugin])
    bad, = simulate_sizes("test:ring-skips-a-reduction", 8, [8192], plugins=[plugin])
    assert good.ok and good.wrong_ranks == []
    assert not bad.ok and 3 in bad.wrong_ranks
    assert bad.messages == good.messages and bad.time == good.time  # same messages, wrong data


@needs_simgrid
def test_polling_a_request_lets_simulated_time_advance(tmp_path):
    """Each Test takes SMPI's 100 us (smpi/test), so a rank polling a receive does not stop the
    clock; Barrier and Waitall work as mpi4py's."""
    plugin = tmp_path / "broken.py"
    plugin.write_text(BROKEN)
    polled, = simulate_sizes("test:polls", 4, [1 << 20], plugins=[plugin])
    plain, = simulate_sizes("ring", 4, [1 << 20])
    assert polled.ok
    assert polled.time >= plain.time + 1e-4


@needs_simgrid
def test_reductions_are_charged_at_the_given_rate():
    """Recursive doubling at P = 8 reduces the whole vector log2 P = 3 times on every rank, all
    on the critical path: the rate adds 3 n / rate to every rank's time."""
    n, rate = 1 << 16, 2e9
    free, = simulate_sizes("recursive_doubling", 8, [n])
    charged, = simulate_sizes("recursive_doubling", 8, [n], reduce_rate=rate)
    assert charged.reductions == [3] * 8 and free.messages == [3] * 8
    for a, b in zip(free.times, charged.times):
        assert b - a == pytest.approx(3 * n / rate, rel=1e-9)


@needs_simgrid
def test_a_deadlock_or_an_exception_fails_the_simulation(tmp_path):
    plugin = tmp_path / "broken.py"
    plugin.write_text(BROKEN)
    with pytest.raises(SimulationError, match=r"ranks \[0, 1, 2, 3\] never returned from the call"):
        simulate_allreduce("test:receives-from-nobody", 4, 64, plugins=[plugin])
    with pytest.raises(SimulationError, match="(?s)rank 2: .*ValueError: rank 2 gives up"):
        simulate_allreduce("test:raises-on-rank-2", 4, 64, plugins=[plugin])
    with pytest.raises(SimulationError, match="native:auto is a library's own allreduce: simulate it with SMPI"):
        simulate_allreduce("native:auto", 4, 64)


def test_without_simgrid_one_clear_line(tmp_path, monkeypatch):
    """SimGrid's module at a wrong path, or nowhere: one line naming where it was looked for and
    how to install it, from the simulation's process and from the loader itself."""
    monkeypatch.setenv(loader.VARIABLE, str(tmp_path / "simgrid.so"))
    with pytest.raises(loader.SimGridMissing, match=r"HARNESS_SIMGRID_MODULE names .*simgrid\.so, which is "
                                                    r"not a file; install it: Debian/Ubuntu") as info:
        simulate_allreduce("ring", 4, 64)
    assert "\n" not in str(info.value)
    garbage = tmp_path / "simgrid.cpython-311-x86_64-linux-gnu.so"
    garbage.write_text("not a shared object")
    monkeypatch.setenv(loader.VARIABLE, str(garbage))
    with pytest.raises(loader.SimGridMissing, match=r"SimGrid's Python module .*\.so does not load here \(.*\); "
                                                    r"install it: Debian/Ubuntu") as info:
        simulate_allreduce("ring", 4, 64)
    assert "\n" not in str(info.value)
    monkeypatch.delenv(loader.VARIABLE)
    monkeypatch.setitem(sys.modules, "simgrid", None)  # `import simgrid` fails
    monkeypatch.setattr(loader, "DEBIAN_DIR", tmp_path / "dist-packages")
    line = loader.available()
    assert line.startswith("no SimGrid Python module: `import simgrid` fails and Debian's python3-simgrid")
    assert "docs/simulation.md" in line and "\n" not in line
    monkeypatch.setenv("PATH", str(tmp_path))
    assert smpi.available().startswith("smpicc and smpirun not found: install SimGrid")
