"""One cell simulated: a harness algorithm run unchanged on ``procs`` SimGrid actors
(``harness.simulate.comm``) on a platform (``harness.simulate.platform``), its result checked
as a measured cell's is (``harness.verify``: each rank's contribution, the expected result,
the sentinel in the receive buffer before the call).

``simulate_allreduce(...)`` (one size) and ``simulate_sizes(...)`` (several, one after the
other in one simulation) run in a process of their own (``python -m harness.simulate.cell SPEC
OUT``): SimGrid allows one engine per process, and the process's peak memory is then the
simulation's own. Each size gives a ``SimResult``: each rank's simulated time of the call (from
a common start to its return), whether every rank's result was right, each rank's messages and
bytes, and the wall time and peak memory the simulation took.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..errors import SimulationError  # noqa: F401  (raised here)
from .. import verify
from ..algorithms import registry
from ..fileio import read_json, write_json
from . import loader
from . import arrival, collectives
from .comm import EAGER_LIMIT, SimComm, SimOp
from .platform import Platform

EXIT_MISSING = 3  # the child's status when SimGrid cannot be loaded


@dataclass
class SimResult:
    algorithm: str
    procs: int
    size: int  # bytes per rank
    dtype: str
    op: str
    platform: dict
    platform_digest: str
    reduce_rate: float | None
    times: list[float]  # per rank, seconds of simulated time of the last call
    ok: bool  # every rank's result right in every call
    wrong_ranks: list[int]
    calls: int = 1
    all_times: list[list[float]] = field(default_factory=list)  # per call, per rank
    # per call: each rank's injected arrival delay (seconds; zeros without delays) and the
    # call's span, first arrival to last return on the simulated clock (PerCall.span)
    delays: list[list[float]] = field(default_factory=list)
    spans: list[float] = field(default_factory=list)
    native: str = "auto"  # what a native (sub-)allreduce runs (collectives.native_name)
    record: dict = field(default_factory=dict)  # rank 0's ctx.scratch["record"] (grid, layout, tau)
    # the run's (every size and call of one simulate_sizes): per rank messages, bytes sent and
    # reductions; seconds the simulation took (engine and actors); peak resident bytes
    messages: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    reductions: list[int] = field(default_factory=list)
    wall: float = 0.0
    peak_rss: int = 0
    simgrid: str = ""

    @property
    def time(self) -> float:
        """The call's time: the slowest rank's (the harness's default metric)."""
        return max(self.times)

    def to_dict(self) -> dict:
        return asdict(self)


def simulate_allreduce(algorithm: str, procs: int, size: int, dtype: str = "float64", op: str = "sum",
                       platform: Platform | None = None, **options) -> SimResult:
    """Simulate one allreduce cell: ``simulate_sizes`` with one size."""
    return simulate_sizes(algorithm, procs, [size], dtype, op, platform, **options)[0]


def simulate_sizes(algorithm: str, procs: int, sizes, dtype: str = "float64", op: str = "sum",
                   platform: Platform | None = None, *, reduce_rate: float | None = None,
                   params: dict | None = None, plugins=(), calls: int = 1,
                   eager_limit: int = EAGER_LIMIT, network_model: str = "SMPI",
                   timeout: float | None = 3600, delays=None, native: str = "auto") -> list[SimResult]:
    """Simulate the cells of one algorithm at ``procs`` ranks, one per size in ``sizes`` (bytes
    per rank, each a multiple of the dtype's size), one after the other in one simulation: each
    size's calls start together on every rank once every rank has finished the previous one, on
    an idle network. ``platform`` defaults to one rank per node of the default ``Platform``,
    ``reduce_rate`` is the local reduction's bytes/s (None: free), ``params`` the algorithm's
    ``ctx.params``, ``plugins`` files that register algorithms, ``calls`` the calls per size
    (each verified; the times are the last one's). ``eager_limit`` and ``network_model`` are
    SMPI's defaults. ``delays``: per call a vector of P arrival delays (seconds; the same for
    every size): after the common start rank r sleeps ``delays[call][r]`` of simulated time,
    then calls the algorithm; each rank's time is then counted from its own arrival (after its
    delay) to its return, as the measured bench's ``PerCall.elapsed`` counts it (the delay is
    not in it); ``SimResult.spans`` is first arrival to last return. An algorithm that reads
    arrival times (``slt``, ``prr``) is handed the exact arrivals (``knowledge`` ``oracle``, the
    default, or ``none``; ``online`` is refused). ``native``: what the library's allreduce
    runs on a (sub-)communicator (``collectives.NATIVE_CHOICES``; ``auto``: MPICH's rule).
    Raises ``loader.SimGridMissing`` without SimGrid, ``SimulationError`` if the run fails."""
    platform = platform or Platform(nodes=procs)
    platform.rank_hosts(procs)  # fits, or a ValueError now
    itemsize = np.dtype(dtype).itemsize
    sizes = [int(s) for s in sizes]
    for size in sizes:
        if size < 0 or size % itemsize:
            raise ValueError(f"size {size} is not a whole number of {dtype} elements")
    if calls < 1:
        raise ValueError(f"calls must be at least 1, not {calls}")
    delays = arrival.check_delays(delays, calls, procs)
    arrival.knowledge(params or {}, algorithm)  # refused now, not in the simulation
    if native not in collectives.NATIVE_CHOICES:
        raise ValueError(f"native {native!r}: valid: {', '.join(collectives.NATIVE_CHOICES)}")
    spec = {"algorithm": algorithm, "procs": procs, "sizes": sizes, "dtype": dtype, "op": op,
            "platform": platform.to_dict(), "reduce_rate": reduce_rate, "params": params or {},
            "plugins": [str(Path(p).resolve()) for p in plugins], "calls": calls,
            "eager_limit": eager_limit, "network_model": network_model, "delays": delays,
            "native": native}
    with tempfile.TemporaryDirectory(prefix="harness-sim-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        write_json(spec_path, spec)
        try:
            proc = subprocess.run([sys.executable, "-m", "harness.simulate.cell", str(spec_path), str(out_path)],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SimulationError(f"simulating {algorithm} at P = {procs} did not finish within {timeout} s "
                                  "(stopped)") from None
        if proc.returncode == EXIT_MISSING:
            raise loader.SimGridMissing(proc.stderr.strip().splitlines()[-1])
        if proc.returncode != 0 or not out_path.exists():
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            raise SimulationError(f"simulating {algorithm} at P = {procs} failed (exit {proc.returncode}):\n{tail}")
        return [SimResult(**row) for row in read_json(out_path)]


# ---------------------------------------------------------------------------------------------
# the simulating process

def _engine(sg, spec: dict, platform_file: Path):
    args = ["harness-simulate", f"--cfg=network/model:{spec['network_model']}",
            "--cfg=surf/precision:1e-9",  # as smpirun sets it
            "--log=xbt_cfg.thres:warning"]
    engine = sg.Engine(args)
    engine.load_platform(str(platform_file))
    return engine


def run(spec: dict, workdir: Path) -> list[dict]:
    """Run the simulation ``spec`` describes in this process (once per process): one result
    per size."""
    sg = loader.load()
    for plugin in spec["plugins"]:
        registry.load_plugin(plugin)
    name = spec["algorithm"]
    if name.startswith("native:"):
        raise SimulationError(f"{name} is a library's own allreduce: simulate it with SMPI "
                              "(harness.simulate.smpi), not with the simulated communicator")
    fn = registry.resolve(name)
    procs, dtype, opname, calls, sizes = spec["procs"], spec["dtype"], spec["op"], spec["calls"], spec["sizes"]
    counts = [size // np.dtype(dtype).itemsize for size in sizes]
    platform = Platform(**spec["platform"])
    engine = _engine(sg, spec, platform.write(workdir))
    bad = verify.sentinel(dtype)
    barrier = sg.Barrier(procs)
    hosts = platform.rank_hosts(procs)
    world = collectives.World(sg, hosts, barrier, spec.get("native", "auto"))
    delays = spec.get("delays") or [[0.0] * procs] * calls
    knowledge = arrival.knowledge(spec["params"], name)
    common = arrival.base(spec["params"], delays)
    started = [[[None] * procs for _ in range(calls)] for _ in sizes]  # arrivals, simulated clock
    times = [[[None] * procs for _ in range(calls)] for _ in sizes]  # [size][call][rank]
    right = [[True] * procs for _ in sizes]
    records: list = [{} for _ in sizes]
    comms: list = [None] * procs
    errors: list[str] = []
    wanted: dict = {}

    def want(i: int) -> np.ndarray:
        if i not in wanted:  # the first rank to need it computes it, once for all ranks
            wanted.clear()
            wanted[i] = verify.expected(procs, counts[i], dtype, opname)
        return wanted[i]

    def rank_main(rank: int):
        try:
            comm = comms[rank] = SimComm(sg, rank, procs, eager_limit=spec["eager_limit"], world=world)
            op = SimOp(sg, opname, spec["reduce_rate"], comm.counters)
            for i, count in enumerate(counts):
                send = verify.contribution(rank, count, dtype, opname)
                recv = verify.aligned_empty(count, dtype)
                ctx = registry.Context(params=dict(spec["params"]))
                prepare = getattr(fn, "prepare", None)
                if prepare is not None:
                    prepare(comm, send, recv, op, ctx)
                for call in range(calls):
                    recv[...] = bad
                    arrival.hand_over(ctx, knowledge, delays[call], common)
                    barrier.wait()
                    if delays[call][rank] > 0:
                        sg.this_actor.sleep_for(delays[call][rank])
                    t0 = started[i][call][rank] = sg.Engine.clock
                    fn(comm, send, recv, op, ctx)
                    times[i][call][rank] = sg.Engine.clock - t0
                    right[i][rank] = right[i][rank] and bool(np.array_equal(recv, want(i)))
                if rank == 0:
                    records[i] = _plain(ctx.scratch.get("record", {}))
                del send, recv, ctx
        except BaseException as exc:  # noqa: BLE001 - any failure ends the simulation, reported
            if type(exc).__name__ == "ActorKilled":
                raise
            errors.append(f"rank {rank}: " + "".join(traceback.format_exception(exc)).strip())
            sg.Actor.kill_all()

    for rank in range(procs):
        sg.Actor.create(f"rank-{rank}", sg.Host.by_name(hosts[rank]), rank_main, rank)
    t0 = time.perf_counter()
    engine.run()
    wall = time.perf_counter() - t0
    if errors:
        raise SimulationError(errors[0])
    for i, size in enumerate(sizes):
        missing = [r for r in range(procs) if times[i][-1][r] is None]
        if missing:
            raise SimulationError(f"at {size} bytes, ranks {missing[:8]}{'...' if len(missing) > 8 else ''} "
                                  "never returned from the call (a deadlock: a receive no rank sends to)")
    version = sg.simgrid_version
    common = {"algorithm": name, "procs": procs, "dtype": dtype, "op": opname, "platform": platform.to_dict(),
              "platform_digest": platform.digest(), "reduce_rate": spec["reduce_rate"], "calls": calls,
              "messages": [c.counters.messages for c in comms], "bytes": [c.counters.bytes for c in comms],
              "reductions": [c.counters.reductions for c in comms], "wall": wall,
              "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "simgrid": ".".join(map(str, version)) if isinstance(version, (tuple, list)) else str(version),
              "delays": [list(map(float, d)) for d in delays], "native": world.native}
    spans = [[max(s + t for s, t in zip(started[i][c], times[i][c])) - min(started[i][c]) for c in range(calls)]
             for i in range(len(sizes))]
    return [{**common, "size": size, "times": times[i][-1], "all_times": times[i], "ok": all(right[i]),
             "wrong_ranks": [r for r in range(procs) if not right[i][r]], "spans": spans[i],
             "record": records[i]}
            for i, size in enumerate(sizes)]


def _plain(record: dict) -> dict:
    """A record's values as JSON takes them (numpy numbers as Python's, others as text)."""
    out = {}
    for k, v in record.items():
        if isinstance(v, np.generic):
            v = v.item()
        elif isinstance(v, (list, tuple)):
            v = [x.item() if isinstance(x, np.generic) else x for x in v]
        elif not isinstance(v, (str, int, float, bool, type(None), dict)):
            v = str(v)
        out[str(k)] = v
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m harness.simulate.cell SPEC.json OUT.json", file=sys.stderr)
        return 2
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    try:
        loader.load()
    except loader.SimGridMissing as exc:
        print(exc, file=sys.stderr)
        return EXIT_MISSING
    spec = read_json(spec_path)
    try:
        result = run(spec, spec_path.parent)
    except SimulationError as exc:
        print(exc, file=sys.stderr)
        return 1
    write_json(out_path, result)
    sys.stdout.flush()
    os._exit(0)  # past SimGrid's teardown of the actors' threads


if __name__ == "__main__":
    sys.exit(main())
