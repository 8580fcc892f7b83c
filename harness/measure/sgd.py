"""Distributed SGD of the PAP paper's CNN, trained for real (Proficz 2018, Sect. 6, Table 5).

``<launcher> python -m harness.measure.sgd <spec.json>`` trains ``harness.dnn.cnn.PapCNN`` on P
ranks, one execution of one algorithm (docs/sgd.md). Per iteration every rank

1. tells its arrival monitor (SLT, PRR) that the iteration's compute begins;
2. takes its next 8 images, runs forward and backward and an SGD step (one torch thread);
   ``edge(f)`` is called right before the last layer (``fc2``), the paper's placement; ``f``
   is the fraction of the iteration's compute done by then, measured on this rank over the
   earlier iterations (``edge: auto``, the paper's 0.44 for the first) or given;
3. (injected straggler, optional) spins ``straggler`` seconds more: the fraction ``f`` of it
   before the forward pass, the rest after the step, so the iteration is stretched the way
   slower compute would stretch it and the monitor's estimate sees it whole;
4. SLT and PRR: hands the monitor's exchanged arrival estimates to the algorithm
   (``ctx.scratch["arrival"]``), waiting for the exchange when it is not over (when the
   latest rank reaches its edge after this rank's arrival; the wait is recorded, and counts
   in the training time, not in the allreduce's); the ring takes none;
5. averages the parameters, as the paper does ("after each training iteration, it is
   averaged over the other processes"): the 145,578 float32 parameters live in one flat
   buffer; ``fn(comm, params, recv, MPI.SUM, ctx)`` bracketed by ``MPI.Wtime`` (the timed
   region, nothing else in it), then ``params = recv / P``.

At the first and the last iteration the algorithm's sum is compared with the library's
``MPI_Allreduce`` (untimed, not counted in the training time); at the end rank 0's parameters
are broadcast and compared bit for bit on every rank. A difference is an error: the program
exits 4 and writes nothing.

Data: synthetic, CIFAR-10-shaped (3×32×32, 10 classes), because these machines have no
CIFAR-10 and download nothing: per class a fixed smooth random template (an 8×8 random
pattern per channel, upsampled bilinearly to 32×32, normalised), each image its class's
template plus Gaussian noise of standard deviation ``noise``; every rank draws its own shard,
a held-out set of ``test_images`` images is drawn from another stream and evaluated by rank 0
after training.

Output (rank 0, atomically): ``spec["output"]``, see ``_document``.

The executions' specs, job scripts and launches: ``harness/campaign/sgd_stage.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import fileio
from ..algorithms import Context, load_plugin, resolve
from ..results import store as results
from .arrival import Monitor
from .launch import init_mpi, launch_provenance, run_or_abort

PAPER_EDGE = 0.44  # the paper: edge() before the last layer, at about 44 % of the compute
EDGE_WINDOW = 20  # iterations of measured fractions the ``auto`` edge takes the median of
CHECK_RTOL = 1e-5  # reference check of the sum against MPI_Allreduce (P > 2: order differs)
WRONG = 4  # exit status of a training whose averaged parameters were wrong


# ------------------------------------------------------------------------------ the data

def templates(seed: int):
    """The 10 class templates (10×3×32×32 float32 torch tensor), fixed by ``seed``."""
    import torch

    from ..dnn.cnn import CLASSES, IMAGE_SHAPE

    rng = np.random.default_rng([seed, 0xC1FA])
    coarse = torch.from_numpy(rng.standard_normal((CLASSES, IMAGE_SHAPE[0], 8, 8)).astype(np.float32))
    t = torch.nn.functional.interpolate(coarse, size=IMAGE_SHAPE[1:], mode="bilinear",
                                        align_corners=False)
    return (t - t.mean(dim=(1, 2, 3), keepdim=True)) / t.std(dim=(1, 2, 3), keepdim=True)


def draw(tmpl, count: int, noise: float, stream: int):
    """``count`` images and labels: class template + N(0, noise²) per pixel, from the torch
    generator seeded ``stream``."""
    import torch

    g = torch.Generator().manual_seed(stream)
    labels = torch.randint(0, tmpl.shape[0], (count,), generator=g)
    images = tmpl[labels] + noise * torch.randn((count, *tmpl.shape[1:]), generator=g)
    return images, labels


def shard_stream(seed: int, rank: int) -> int:
    return seed * 1_000_003 + 1 + rank


def test_stream(seed: int) -> int:
    return seed * 1_000_003 + 999_983  # never a rank's stream below a million ranks


# ------------------------------------------------------------------------------ training

MONITOR_POLL = 50e-6  # seconds the monitor sleeps between tests of its exchange


def _spin(seconds: float) -> None:
    """Compute (busy-wait) for ``seconds``: the injected straggler's extra work."""
    if seconds <= 0:
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _flat_parameters(model):
    """Make every parameter a view of one flat float32 buffer; returns the buffer (torch)."""
    import torch

    params = list(model.parameters())
    flat = torch.zeros(sum(p.numel() for p in params), dtype=torch.float32)
    off = 0
    for p in params:
        n = p.numel()
        flat[off:off + n].copy_(p.data.reshape(-1))
        p.data = flat[off:off + n].view_as(p)
        off += n
    return flat


@dataclass(frozen=True)
class Settings:
    """An execution's ``experiment_settings`` (the config's ``sgd:`` entry), typed."""

    iterations: int
    batch: int
    seed: int
    lr: float
    noise: float
    edge: float | None  # the fraction edge() is called at; None: ``auto`` (measured)
    straggler: float  # seconds the injected straggler computes more per iteration
    straggler_rank: str | int  # ``random`` (drawn per iteration) or a rank
    test_images: int
    tau: object = None  # PRR's tau setting

    @classmethod
    def of(cls, s: dict) -> Settings:
        return cls(iterations=int(s["iterations"]), batch=int(s["batch"]), seed=int(s["seed"]),
                   lr=float(s["lr"]), noise=float(s["noise"]),
                   edge=None if s["edge"] == "auto" else float(s["edge"]),
                   straggler=float(s["straggler"]), straggler_rank=s["straggler_rank"],
                   test_images=int(s["test_images"]), tau=s.get("tau"))

    def stragglers(self, size: int) -> np.ndarray:
        """The straggling rank of each iteration."""
        if self.straggler_rank == "random":
            return np.random.default_rng([self.seed, 0x57A6]).integers(0, size, self.iterations)
        return np.full(self.iterations, int(self.straggler_rank))


class Series:
    """One rank's record of its iterations (times in seconds; ``arrival``, ``begin``, ``edge``
    on the common clock) and of its reference checks."""

    def __init__(self, n: int):
        self.elapsed, self.arrival, self.begin = np.zeros(n), np.zeros(n), np.zeros(n)
        self.edge, self.used_f, self.loss = np.zeros(n), np.zeros(n), np.zeros(n)
        self.estimate, self.waits = np.full(n, np.nan), np.zeros(n)
        self.checks, self.check_seconds, self.ok = [], 0.0, True

    def per_rank(self, total: float, waited: int) -> dict:
        """What rank 0 gathers from this rank for the document."""
        return {"elapsed": self.elapsed, "arrival": self.arrival, "begin": self.begin,
                "edge": self.edge, "edge_fraction_used": self.used_f, "loss": self.loss,
                "estimate": self.estimate, "total": total, "estimates_late": waited,
                "estimate_wait": self.waits, "checks": self.checks}


class Trainer:
    """One rank's training: the model with its parameters in one flat buffer (the allreduce's
    send buffer), this rank's shard, the algorithm with its context, the arrival monitor (SLT,
    PRR) and the edge() hook before the last layer."""

    def __init__(self, comm, MPI, algorithm: str, settings: Settings):
        import torch

        from ..dnn.cnn import PapCNN, parameter_count

        self.comm, self.MPI, self.s, self.algorithm = comm, MPI, settings, algorithm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.fn = resolve(algorithm)
        # the model: the same initial parameters everywhere (seeded; rank 0's broadcast to be sure)
        torch.manual_seed(settings.seed)
        self.model = PapCNN()
        self.flat = _flat_parameters(self.model)
        self.params = self.flat.numpy()  # shares memory with the model's parameters
        comm.Bcast(self.params, root=0)
        self.count = self.params.size
        assert self.count == parameter_count(self.model)
        self.recv = np.empty_like(self.params)
        self.ref = np.empty_like(self.params)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=settings.lr)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        # the data: this rank's shard, drawn before the clock starts
        self.tmpl = templates(settings.seed)
        self.images, self.labels = draw(self.tmpl, settings.iterations * settings.batch,
                                        settings.noise, shard_stream(settings.seed, self.rank))
        self._connect()
        # edge(): right before the last layer's forward pass
        self.fractions: list[float] = []
        self.t_edge, self.f = np.nan, PAPER_EDGE
        self.model.last_layer.register_forward_pre_hook(self._before_last_layer)
        self.stragglers = settings.stragglers(self.size)

    def _connect(self) -> None:
        """The algorithm: context, prepare (PRR's tau), the epoch of the common clock, the
        monitor thread for SLT/PRR, one untimed call."""
        MPI, comm = self.MPI, self.comm
        self.ctx = Context(params={} if self.algorithm != "prr" else {"tau": self.s.tau},
                           sendspec=[MPI.buffer(self.params), self.count, MPI.FLOAT],
                           recvspec=[MPI.buffer(self.recv), self.count, MPI.FLOAT])
        self.args = (comm, self.params, self.recv, MPI.SUM, self.ctx)  # the allreduce's
        prepare = getattr(self.fn, "prepare", None)
        if prepare:
            prepare(*self.args)
        self.epoch = comm.bcast(time.time(), root=0)
        # the exchange yields the core (Monitor's poll): Open MPI and MPICH busy-poll inside a
        # blocking Allgather, and here the monitor waits from its rank's edge to the latest
        # rank's while the main thread computes; with as many ranks as cores the spinning
        # thread took half its own rank's core (measured: the early rank's edge fraction fell
        # from 0.44 to 0.32)
        uses_arrival = bool(getattr(self.fn, "uses_arrival", False))
        self.monitor = Monitor(comm, self.clock, poll=MONITOR_POLL) if uses_arrival else None
        # one untimed call before training opens the connections the training's calls use
        # (the paper's monitor thread warms them up after each exchange); result discarded
        self.fn(*self.args)

    def clock(self) -> float:
        return time.time() - self.epoch

    def _before_last_layer(self, module, args) -> None:
        self.t_edge = self.clock()
        if self.monitor is not None:
            self.monitor.edge(self.f)

    def train(self) -> tuple[Series, float]:
        """Every iteration; the series and the training time (the reference checks left out)."""
        log = Series(self.s.iterations)
        wtime = self.MPI.Wtime
        self.comm.Barrier()
        t_start = wtime()
        for i in range(self.s.iterations):
            self._iteration(i, log)
        return log, wtime() - t_start - log.check_seconds

    def _iteration(self, i: int, log: Series) -> None:
        """Compute (with the straggler's extra, edge() inside), the arrival estimates, the timed
        allreduce, the reference check at the first and last iteration, the average."""
        s, rank, monitor, wtime = self.s, self.rank, self.monitor, self.MPI.Wtime
        f = s.edge if s.edge is not None else (
            float(np.median(self.fractions[-EDGE_WINDOW:])) if self.fractions else PAPER_EDGE)
        self.f = log.used_f[i] = f
        begin = self.clock()
        if monitor is not None:
            monitor.begin(begin)
        extra = s.straggler if self.stragglers[i] == rank else 0.0
        _spin(f * extra)
        loss = self._step(i)
        _spin((1 - f) * extra)
        if monitor is not None:
            w0 = wtime()
            given = monitor.estimates()  # identical on every rank (the monitor's Allgather)
            log.waits[i] = wtime() - w0  # > 0 when the latest rank's edge came after this arrival
            self.ctx.scratch["arrival"] = given
            log.estimate[i] = given[rank]
        t_arr = self.clock()
        fn, args = self.fn, self.args
        a = wtime()
        fn(*args)
        b = wtime()
        if i in (0, s.iterations - 1):  # the algorithm's sum against the library's (untimed)
            self._check(i, log)
        np.divide(self.recv, self.size, out=self.params)  # the next iteration's parameters
        log.elapsed[i], log.arrival[i], log.begin[i] = b - a, t_arr, begin
        log.edge[i], log.loss[i] = self.t_edge, float(loss.detach())
        span = t_arr - begin
        if span > 0 and np.isfinite(self.t_edge):
            self.fractions.append((self.t_edge - begin) / span)

    def _step(self, i: int):
        """Forward (edge() before the last layer), backward and an SGD step on the next batch."""
        b = self.s.batch
        x, y = self.images[i * b:(i + 1) * b], self.labels[i * b:(i + 1) * b]
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss

    def _check(self, i: int, log: Series) -> None:
        """The algorithm's sum against the library's ``MPI_Allreduce`` (not in the time)."""
        wtime, recv, ref = self.MPI.Wtime, self.recv, self.ref
        c0 = wtime()
        self.comm.Allreduce(self.params, ref, self.MPI.SUM)
        diff = float(np.max(np.abs(recv.astype(np.float64) - ref)))
        scale = float(np.max(np.abs(ref)))
        good = (bool(np.array_equal(recv, ref)) if self.size <= 2
                else diff <= CHECK_RTOL * max(scale, 1e-30))
        log.checks.append({"iteration": i, "max_abs_diff": diff, "max_abs": scale, "ok": good})
        log.ok = log.ok and good
        log.check_seconds += wtime() - c0

    def close(self) -> int:
        """End the monitor; the rank-iterations it waited for the exchange."""
        if self.monitor is None:
            return 0
        waited = self.monitor.waited
        self.monitor.close()
        return waited

    def identical(self) -> bool:
        """Verification: this rank holds rank 0's parameters bit for bit (collective)."""
        self.comm.Bcast(self.params.copy() if self.rank == 0 else self.ref, root=0)
        return True if self.rank == 0 else bool(np.array_equal(self.ref, self.params))

    def evaluate(self) -> tuple[float, float]:
        """The test loss and accuracy on the held-out images."""
        import torch

        s = self.s
        test_x, test_y = draw(self.tmpl, s.test_images, s.noise, test_stream(s.seed))
        with torch.no_grad():
            self.model.eval()
            logits = torch.cat([self.model(test_x[j:j + 500]) for j in range(0, len(test_x), 500)])
            test_loss = float(self.loss_fn(logits, test_y))
            accuracy = float((logits.argmax(1) == test_y).float().mean())
        return test_loss, accuracy


@dataclass(frozen=True)
class Outcome:
    """What the execution's document says besides the per-rank series."""

    procs: int
    parameters: int
    stragglers: np.ndarray
    delay: float
    test_loss: float
    accuracy: float
    record: dict
    provenance: dict
    started: str


def train(spec: dict) -> int:
    """One execution under MPI (every rank); 0, or WRONG when the parameters differ."""
    MPI = init_mpi("multiple")  # the monitor thread of SLT/PRR; the same level for the ring
    import torch

    torch.set_num_threads(1)
    for plugin in spec.get("plugins", []):
        load_plugin(plugin)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size != spec["procs"]:
        if rank == 0:
            print(f"harness.measure.sgd: launched with {size} ranks, the spec needs {spec['procs']}",
                  file=sys.stderr)
        return 3
    started = results.now()
    provenance = launch_provenance(comm, spec)
    if rank == 0:
        provenance.update(torch=torch.__version__, torch_threads=torch.get_num_threads())
    t = Trainer(comm, MPI, spec["algorithm"], Settings.of(spec["experiment_settings"]))
    log, total = t.train()
    waited = t.close()
    same = t.identical()
    every_same = comm.allgather(same)
    every_ok = comm.allgather(log.ok)
    per_rank = comm.gather(log.per_rank(total, waited), root=0)
    if not all(every_same) or not all(every_ok):
        if rank == 0:
            bad = [r for r, v in enumerate(every_same) if not v]
            print(f"harness.measure.sgd: {t.algorithm}: WRONG RESULT: "
                  + (f"parameters differ from rank 0's on rank(s) {bad}; " if bad else "")
                  + (f"sum differs from MPI_Allreduce: {log.checks}" if not all(every_ok) else ""),
                  file=sys.stderr, flush=True)
        return WRONG
    if rank == 0:
        test_loss, accuracy = t.evaluate()
        doc = _document(spec, per_rank, Outcome(
            size, t.count, t.stragglers, t.s.straggler, test_loss, accuracy,
            t.ctx.scratch.get("record") or {}, provenance, started))
        fileio.write_json(Path(spec["output"]), doc)
        print(f"sgd {spec['experiment']} {t.algorithm}-{spec['execution']}: allreduce "
              f"{doc['allreduce_mean'] * 1e3:.3f} ms, total {doc['total_time']:.2f} s, loss "
              f"{doc['loss'][0]:.3f} -> {doc['final']['train_loss_last20']:.3f}, test accuracy "
              f"{accuracy:.3f}", flush=True)
    return 0


def _document(spec, per_rank, out: Outcome) -> dict:
    """The execution's JSON document (times in seconds; per-rank arrays indexed [rank][i])."""
    el = np.array([r["elapsed"] for r in per_rank])  # ranks × iterations
    loss = np.array([r["loss"] for r in per_rank]).mean(axis=0)
    arr = np.array([r["arrival"] for r in per_rank])
    begin = np.array([r["begin"] for r in per_rank])
    edge = np.array([r["edge"] for r in per_rank])
    frac = (edge - begin) / (arr - begin)
    totals = [float(r["total"]) for r in per_rank]
    est = np.array([r["estimate"] for r in per_rank])
    knows = bool(np.isfinite(est).any())
    err = (est - arr) if knows else None
    per_iter = el.mean(axis=0)
    s = spec["experiment_settings"]
    return {
        "kind": "sgd-execution",
        "campaign": spec["campaign"], "experiment": spec["experiment"],
        "algorithm": spec["algorithm"], "execution": spec["execution"],
        "library": spec["library"], "procs": out.procs, "spec": spec,
        "model": {"name": "PapCNN", "parameters": out.parameters, "dtype": "float32"},
        "data": {"kind": "synthetic CIFAR-10-shaped: class template + Gaussian noise",
                 "noise": s["noise"], "images_per_rank": int(s["iterations"]) * int(s["batch"]),
                 "test_images": int(s["test_images"])},
        # the mean over ranks of each rank's elapsed time, per iteration, and its mean
        "allreduce_per_iteration": per_iter.tolist(),
        "allreduce_mean": float(per_iter.mean()),
        "allreduce_max_per_iteration": el.max(axis=0).tolist(),
        "allreduce_per_rank": el.tolist(),
        "loss": loss.tolist(),  # mean over ranks of the local mini-batch loss
        "loss_per_rank": [r["loss"].tolist() for r in per_rank],
        # training: the slowest rank's time from the common start to the end of its last
        # iteration (the reference checks at the first and last iteration left out)
        "total_time": max(totals), "total_time_per_rank": totals,
        "arrival_per_rank": arr.tolist(),  # seconds on the common clock (epoch by rank 0)
        "compute_per_rank": (arr - begin).tolist(),  # iteration begin to allreduce arrival
        "arrival_spread_mean": float((arr.max(axis=0) - arr.min(axis=0)).mean()),
        "edge": {"setting": s["edge"], "measured_fraction_median": float(np.nanmedian(frac)),
                 "measured_fraction_per_rank": np.nanmedian(frac, axis=1).tolist(),
                 "used_fraction_median": float(np.median([r["edge_fraction_used"] for r in per_rank]))},
        "arrival_estimate": ({"per_rank": est.tolist(),
                              "abs_error_ms_median": float(np.nanmedian(np.abs(err)) * 1e3),
                              "abs_error_ms_p95": float(np.nanpercentile(np.abs(err), 95) * 1e3),
                              "estimates_late": int(sum(r["estimates_late"] for r in per_rank)),
                              # seconds each rank's main thread waited for the exchanged
                              # estimates before its allreduce (not in the allreduce's time;
                              # in the training's), per rank and iteration, and its mean
                              "wait_per_rank": [r["estimate_wait"].tolist() for r in per_rank],
                              "wait_mean": float(np.mean([r["estimate_wait"] for r in per_rank]))}
                             if knows else None),
        "straggler": {"delay": out.delay, "rank": s["straggler_rank"],
                      "ranks": out.stragglers.tolist() if out.delay > 0 else []},
        "verification": {"ranks_identical": True,
                         "reference_checks": [r["checks"] for r in per_rank]},
        "final": {"train_loss_last20": float(loss[-20:].mean()), "test_loss": out.test_loss,
                  "test_accuracy": out.accuracy},
        "record": out.record,
        "provenance": out.provenance,
        "started": out.started, "finished": results.now(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.measure.sgd", description=__doc__.split("\n")[0])
    ap.add_argument("spec", help="an execution's spec (results/<c>/sgd/<experiment>/jobs/*.json)")
    spec = ap.parse_args(argv).spec
    return run_or_abort(lambda: train(fileio.read_json(spec)))


if __name__ == "__main__":
    sys.exit(main())
