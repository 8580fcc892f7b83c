"""SMPI's own ``MPI_Allreduce`` on a simulated platform, for reference: a tiny C program that
times one call per size, compiled once with ``smpicc`` and run with ``smpirun`` on the
platform file of ``harness.simulate.platform``.

Per size the program makes one untimed call (an algorithm's first call builds what it keeps:
a node-aware one its node and leader communicators, which cost SMPI's selectors up to a
millisecond), then gives the timed call the same start on every rank: rank r sleeps (in
simulated time) until an instant agreed a whole simulated second after the latest rank's
clock, reads ``MPI_Wtime``, calls ``MPI_Allreduce`` and reads it again, and checks its result
against the reduction's closed form; rank 0 collects the ranks' times and verdicts point to
point, on a communicator of the program's own. ``--cfg=smpi/allreduce:NAME`` forces SMPI's algorithm NAME (``rdb``, ``lr``,
``rab1``, ``ompi_ring_segmented``, ...), ``--cfg=smpi/coll-selector:ompi|mpich|impi|...``
lets a library's selection logic choose. SMPI charges no time for the program's own code
between MPI calls (``smpi/simulate-computation:no``) nor for reading the clock
(``smpi/wtime:0``), and none for its collectives' reductions, so a time here is the network's
alone (compare with ``reduce_rate=None`` in ``harness.simulate.cell``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import paths
from ..errors import SmpiError, SmpiMissing  # noqa: F401  (raised here)
from ..fileio import atomic_write_text
from .platform import Platform

SOURCE = r"""
/* harness.simulate.smpi: times MPI_Allreduce once per COUNT on every rank and checks its
   result on every rank (element i of rank r: 1 + (r + i) % 4, or for prod 2 on rank i % P and
   1 elsewhere; the expected reduction in closed form, exact in every dtype).
   usage: allreduce_timer DTYPE OP COUNT [COUNT ...]
   prints on rank 0, per COUNT: "harness-smpi COUNT T_START t_0 t_1 ... t_{P-1}"
   and "harness-smpi-wrong COUNT r ..." (the ranks whose result was wrong; none: no r) */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_until(double when) {
  double d = when - MPI_Wtime();
  if (d > 0) {
    struct timespec ts;
    ts.tv_sec = (time_t)d;
    ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
  }
}

enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN };

static double value(int op, int rank, int size, long i) {
  if (op == OP_PROD) return rank == (int)(i % size) ? 2.0 : 1.0;
  return 1.0 + (double)((rank + i) % 4);
}

static double expected(int op, int size, long i) {
  if (op == OP_PROD) return 2.0;
  long q = size / 4, m = size % 4;
  if (op == OP_SUM) {
    double s = 10.0 * (double)q;
    for (long k = 0; k < m; k++) s += 1.0 + (double)((k + i) % 4);
    return s;
  }
  if (q > 0) return op == OP_MAX ? 4.0 : 1.0;
  double e = op == OP_MAX ? 0.0 : 5.0;
  for (long k = 0; k < m; k++) {
    double v = 1.0 + (double)((k + i) % 4);
    e = op == OP_MAX ? (v > e ? v : e) : (v < e ? v : e);
  }
  return e;
}

static void put(void *buf, int kind, long i, double v) {
  switch (kind) {
    case 0: ((double *)buf)[i] = v; break;
    case 1: ((float *)buf)[i] = (float)v; break;
    case 2: ((int *)buf)[i] = (int)v; break;
    default: ((long long *)buf)[i] = (long long)v;
  }
}

static double get(const void *buf, int kind, long i) {
  switch (kind) {
    case 0: return ((const double *)buf)[i];
    case 1: return (double)((const float *)buf)[i];
    case 2: return (double)((const int *)buf)[i];
    default: return (double)((const long long *)buf)[i];
  }
}

/* a whole simulated second after the latest clock of all ranks, agreed point to point */
static double agreed_start(int rank, int size, MPI_Comm aux) {
  double now = MPI_Wtime(), latest = now, got;
  if (rank == 0) {
    for (int r = 1; r < size; r++) {
      MPI_Recv(&got, 1, MPI_DOUBLE, r, 7003, aux, MPI_STATUS_IGNORE);
      latest = got > latest ? got : latest;
    }
    latest = ceil(latest) + 1.0;
    for (int r = 1; r < size; r++) MPI_Send(&latest, 1, MPI_DOUBLE, r, 7004, aux);
  } else {
    MPI_Send(&now, 1, MPI_DOUBLE, 0, 7003, aux);
    MPI_Recv(&latest, 1, MPI_DOUBLE, 0, 7004, aux, MPI_STATUS_IGNORE);
  }
  return latest;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 4) {
    if (rank == 0) fprintf(stderr, "usage: %s DTYPE OP COUNT [COUNT ...]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Datatype type = MPI_DOUBLE;
  size_t item = 8;
  int kind = 0, opk = OP_SUM;
  if (!strcmp(argv[1], "float32")) { type = MPI_FLOAT; item = 4; kind = 1; }
  else if (!strcmp(argv[1], "int32")) { type = MPI_INT; item = 4; kind = 2; }
  else if (!strcmp(argv[1], "int64")) { type = MPI_LONG_LONG; item = 8; kind = 3; }
  else if (strcmp(argv[1], "float64")) { fprintf(stderr, "unknown dtype %s\n", argv[1]); MPI_Abort(MPI_COMM_WORLD, 2); }
  MPI_Op op = MPI_SUM;
  if (!strcmp(argv[2], "prod")) { op = MPI_PROD; opk = OP_PROD; }
  else if (!strcmp(argv[2], "max")) { op = MPI_MAX; opk = OP_MAX; }
  else if (!strcmp(argv[2], "min")) { op = MPI_MIN; opk = OP_MIN; }
  else if (strcmp(argv[2], "sum")) { fprintf(stderr, "unknown op %s\n", argv[2]); MPI_Abort(MPI_COMM_WORLD, 2); }
  double start;
  double *all = malloc(sizeof(double) * size);
  int *bad = malloc(sizeof(int) * size);
  /* the program's own messages on a communicator of their own: never matched by a receive of
     the timed call (SMPI's redbcast of the next size matched them) */
  MPI_Comm aux;
  MPI_Comm_dup(MPI_COMM_WORLD, &aux);
  /* HARNESS_SMPI_BREAK_RANK=r spoils rank r's result after each call: the check's own test */
  const char *brk = getenv("HARNESS_SMPI_BREAK_RANK");
  int broken = brk ? atoi(brk) : -1;
  for (int a = 3; a < argc; a++) {
    long count = atol(argv[a]);
    void *sbuf = calloc(count ? count : 1, item), *rbuf = calloc(count ? count : 1, item);
    for (long i = 0; i < count; i++) put(sbuf, kind, i, value(opk, rank, size, i));
    /* one untimed call first, as the measured bench warms up: an algorithm's first call builds
       what it keeps (a node-aware one its node and leader communicators) */
    MPI_Allreduce(sbuf, rbuf, (int)count, type, op, MPI_COMM_WORLD);
    for (long i = 0; i < count; i++) put(rbuf, kind, i, -1.0);
    start = agreed_start(rank, size, aux);
    sleep_until(start);
    double t0 = MPI_Wtime();
    MPI_Allreduce(sbuf, rbuf, (int)count, type, op, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    if (broken == rank && count > 0) put(rbuf, kind, count - 1, -2.0);
    int wrong = 0;
    for (long i = 0; i < count && !wrong; i++) wrong = get(rbuf, kind, i) != expected(opk, size, i);
    /* rank 0 collects (time, wrong) point to point: a selector's collectives (SMPI's impi
       reduce and bcast) mixed up consecutive calls */
    double mine[2] = {t1 - t0, (double)wrong}, got[2];
    if (rank == 0) {
      all[0] = mine[0];
      bad[0] = wrong;
      for (int r = 1; r < size; r++) {
        MPI_Recv(got, 2, MPI_DOUBLE, r, 7001, aux, MPI_STATUS_IGNORE);
        all[r] = got[0];
        bad[r] = got[1] != 0.0;
      }
    } else {
      MPI_Send(mine, 2, MPI_DOUBLE, 0, 7001, aux);
    }
    if (rank == 0) {
      printf("harness-smpi %ld %.17g", count, t0);
      for (int r = 0; r < size; r++) printf(" %.17g", all[r]);
      printf("\nharness-smpi-wrong %ld", count);
      for (int r = 0; r < size; r++) if (bad[r]) printf(" %d", r);
      printf("\n");
      fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
  }
  free(all);
  free(bad);
  MPI_Comm_free(&aux);
  MPI_Finalize();
  return 0;
}
"""


@dataclass
class SmpiResult:
    algorithm: str  # the forced SMPI algorithm, "selector:<name>", or "<algorithm>+selector:<name>"
    procs: int
    size: int  # bytes per rank
    dtype: str
    op: str
    platform_digest: str
    times: list[float]  # per rank, seconds of simulated time
    wall: float  # seconds the whole smpirun took (all sizes of the run)
    peak_rss: int  # bytes, smpirun's peak resident memory (all sizes of the run)
    wrong_ranks: list[int] = field(default_factory=list)  # ranks whose result was wrong

    @property
    def ok(self) -> bool:
        """Every rank's result right (checked against the closed-form reduction)."""
        return not self.wrong_ranks

    @property
    def time(self) -> float:
        return max(self.times)

    def to_dict(self) -> dict:
        return asdict(self)


def available() -> str | None:
    """None when smpicc and smpirun are on PATH, else the one line saying what is missing."""
    missing = [t for t in ("smpicc", "smpirun") if shutil.which(t) is None]
    if missing:
        return (f"{' and '.join(missing)} not found: install SimGrid (Debian/Ubuntu `apt-get install "
                f"libsimgrid-dev`, .ci/simgrid.sh; docs/simulation.md)")
    return None


def cache_dir() -> Path:
    return paths.mpi_root() / "smpi"


def build(directory: Path | None = None) -> Path:
    """The timer program, compiled once per source and SimGrid version into ``.mpi/smpi/``."""
    problem = available()
    if problem:
        raise SmpiMissing(problem)
    version = subprocess.run(["smpirun", "-version"], capture_output=True, text=True).stdout.strip()
    key = hashlib.sha256((SOURCE + version).encode()).hexdigest()[:12]
    directory = Path(directory or cache_dir())
    exe = directory / f"allreduce_timer-{key}"
    if exe.exists():
        return exe
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / f"allreduce_timer-{key}.c"
    atomic_write_text(src, SOURCE)
    tmp = directory / f".allreduce_timer-{key}.{os.getpid()}"
    proc = subprocess.run(["smpicc", "-O2", "-o", str(tmp), str(src), "-lm"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SmpiError(f"smpicc failed on {src}:\n{proc.stderr.strip()[-2000:]}")
    os.replace(tmp, exe)
    return exe


def _run(argv: list[str], timeout: float | None) -> tuple[int, str, str, float, int]:
    """Run ``argv`` in its own process group: exit status, stdout, stderr, wall seconds and the
    peak resident memory of the process and everything it waited for (``wait4``)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL)) if timeout else None
        if timer:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            if timer:
                timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), wall, usage.ru_maxrss * 1024


def smpi_allreduce(algorithm, procs: int, sizes, dtype: str = "float64", op: str = "sum",
                   platform: Platform | None = None, *, selector: str | None = None,
                   config: dict | None = None, timeout: float | None = 3600) -> list[SmpiResult]:
    """SMPI's ``MPI_Allreduce`` at ``procs`` ranks, once per size in ``sizes`` (bytes per rank),
    in one ``smpirun``: forced to SMPI's ``algorithm``, or chosen by the ``selector``
    (``ompi``, ``mpich``, ``impi``, ...) when ``algorithm`` is None; with both, the selector
    chooses the other collectives (those an algorithm calls inside) and ``algorithm`` the
    allreduce. ``config`` adds ``--cfg=KEY:VALUE`` settings. ``algorithm`` may also be a
    ``natives.SmpiChoice`` (``natives.smpi_choice(family, name)``): its selector, algorithm and
    settings, under ``config``'s."""
    if hasattr(algorithm, "kwargs"):  # a natives.SmpiChoice
        choice = algorithm.kwargs()
        if selector is not None and choice["selector"] not in (None, selector):
            raise ValueError(f"selector {selector!r} contradicts the choice's {choice['selector']!r}")
        algorithm, selector = choice["algorithm"], selector or choice["selector"]
        config = {**choice["config"], **(config or {})}
    if algorithm is None and selector is None:
        raise ValueError("give an algorithm, a selector, or both")
    platform = platform or Platform(nodes=procs)
    exe = build()
    itemsize = np.dtype(dtype).itemsize
    counts = []
    for size in sizes:
        if size < 0 or size % itemsize:
            raise ValueError(f"size {size} is not a whole number of {dtype} elements")
        counts.append(size // itemsize)
    settings = {"smpi/simulate-computation": "no", "smpi/wtime": "0", **(config or {})}
    if selector is not None:
        settings["smpi/coll-selector"] = selector
    if algorithm is not None:
        settings["smpi/allreduce"] = algorithm
    with tempfile.TemporaryDirectory(prefix="harness-smpi-") as tmp:
        platform_file = platform.write(tmp)
        hostfile = Path(tmp) / "hostfile"
        atomic_write_text(hostfile, platform.hostfile(procs))
        argv = ["smpirun", "-np", str(procs), "-platform", str(platform_file), "-hostfile", str(hostfile),
                *[f"--cfg={k}:{v}" for k, v in settings.items()], "--log=root.thres:warning",
                str(exe), dtype, op, *map(str, counts)]
        status, out, err, wall, rss = _run(argv, timeout)
    rows = [line.split()[1:] for line in out.splitlines() if line.startswith("harness-smpi ")]
    name = algorithm if selector is None else f"selector:{selector}" if algorithm is None else \
        f"{algorithm}+selector:{selector}"
    if status == -signal.SIGKILL and timeout and wall >= timeout:
        raise SmpiError(f"smpirun ({name}, P = {procs}) did not finish within "
                        f"{timeout} s (stopped)")
    if status != 0 or len(rows) != len(counts):
        tail = "\n".join(err.strip().splitlines()[-15:])
        raise SmpiError(f"smpirun ({name}, P = {procs}) exited {status} "
                        f"with {len(rows)} of {len(counts)} sizes timed:\n{tail}")
    wrong = [[int(r) for r in line.split()[2:]] for line in out.splitlines()
             if line.startswith("harness-smpi-wrong ")]
    if len(wrong) != len(rows):
        raise SmpiError(f"smpirun ({name}, P = {procs}) checked {len(wrong)} of {len(rows)} "
                        f"sizes")
    return [SmpiResult(name, procs, int(row[0]) * itemsize, dtype, op, platform.digest(),
                       [float(t) for t in row[2:]], wall, rss, bad)
            for row, bad in zip(rows, wrong)]
