"""SUARA2 (Nuriyev et al. 2023, Sect. 4.2-4.5, Algorithm 1): the P processes form a
P_r x P_c grid; an allreduce runs in every process row (P_c processes each, algorithm a_r),
then in every process column (P_r processes, algorithm a_c) on the rows' results.

Parameters (``ctx.params``):
- ``grid``: ``"auto"`` (default: the model's choice, ``harness.models.decide_suara2`` with the
  paper's Table 4 parameters; the best single algorithm on a 1 x P grid when the model
  predicts no grid wins or P is prime, recorded as ``fallback``), ``"best-grid"`` (the model's
  best proper grid and combination even when it predicts a loss: what Fig. 8 measures) or
  ``"<P_r>x<P_c>"`` (the manual override Fig. 7 sweeps);
- ``row`` / ``col``: the sub-allreduce of each dimension, a harness algorithm (``ring``,
  ``segmented_ring``, …), ``native`` (the library's MPI_Allreduce on the sub-communicator,
  as the launch environment forces it) or ``native:<name>`` (a catalogue entry, forced on
  that dimension alone: by the launch environment when both dimensions ask for the same one
  and the run was launched with it, else through the MPI_T control variable, see
  ``harness.mpit``). With ``grid: auto`` they default to the model's pick. The mechanism used
  is recorded (``row_forcing`` / ``col_forcing``);
- ``subs``: with ``grid: auto``, how the model's pick is run: ``harness`` (default: the
  harness's Python versions) or ``native`` (Open MPI's own algorithm of that name, forced per
  dimension; the six models of Table 1 are Open MPI's algorithms).
- ``model``: the Hockney parameters the model decides with: ``paper`` (default: Table 4,
  ``Params.paper()``) or the path of a ``model_params.json`` as ``harness fit <campaign>``
  writes it (``Params.to_dict()`` layout), relative to the repository root or absolute. Read
  once per process; the record says which (``model``, ``model_source``, ``model_sha256``);
- ``small``: ``off`` (default) or ``native-best``: the paper's wrapper rule (Sect. 5) —
  a message of at most ``small_max`` bytes (default ``1MiB``: the paper's "1 MB", read as
  2^20 B like its "8 KB" segment) is reduced by the library's ``MPI_Allreduce`` on the whole
  communicator, forced to the model's best single algorithm (``models.best_single`` ->
  ``MODEL_TO_OPENMPI``); larger ones run SUARA2. Recorded as ``small_rule`` (true/false) and
  ``small_algorithm``.

The row and column communicators are split once per (communicator, grid) and reused; the
bench calls ``prepare`` before the warm-up, so the split is never in a timed repetition.
When no grid 1 < P_c < P exists (P prime, or the model prefers one algorithm), ``auto`` runs
the grid (1, P): one row with every process, which is the single algorithm.
"""

from __future__ import annotations

import numpy as np

from .. import mpit, paths, verify
from ..libraries import get_library
from ..units import format_size, parse_size
from .native import native_allreduce
from .p2p import mpi_of, timer_of
from .registry import REGISTRY, Context, register


def _max(comm):
    return mpi_of(comm).MAX

MODEL_TO_OPENMPI = {"linear": "native:basic_linear", "nono": "native:nonoverlapping",
                    "rd": "native:recursive_doubling", "rnos": "native:ring",
                    "rs": "native:segmented_ring", "rab": "native:rabenseifner"}
MODEL_TO_HARNESS = {"linear": "linear", "nono": "nonoverlapping", "rd": "recursive_doubling",
                    "rnos": "ring", "rs": "segmented_ring", "rab": "rabenseifner"}


def _sub_algorithm(name: str, comm):
    """(allreduce function, communicator to call it on, forcing mechanism) for one dimension."""

    if name == "native":
        return native_allreduce, comm, "launch-env"
    simulated = getattr(comm, "native_algorithm", None)  # a simulated communicator's forcing
    if name.startswith("native:") and simulated is not None:
        return simulated(name), comm, "simulated"
    if name.startswith("native:"):
        lib = mpit.running_library()
        env = get_library(lib).native(name).env  # KeyError lists the valid names
        if mpit.launch_forces(env):
            return native_allreduce, comm, "launch-env" if env else "none"
        forced = mpit.force(comm, lib, env)
        if forced.before is None:
            return native_allreduce, forced.comm, forced.mechanism
        before, after = forced.before, forced.after

        def allreduce(c, sendbuf, recvbuf, op, ctx):
            before()
            try:
                native_allreduce(c, sendbuf, recvbuf, op, ctx)
            finally:
                after()

        return allreduce, forced.comm, forced.mechanism
    if name not in REGISTRY or name.startswith("suara"):
        raise ValueError(f"suara2: unknown sub-allreduce {name!r}; valid: native, native:<name>, "
                         + ", ".join(sorted(n for n in REGISTRY if not n.startswith("suara"))))
    return REGISTRY[name].fn, comm, "harness"


_MODELS: dict = {}  # resolved path -> (Params, record fields): a file is read once per process


def model_params(params: dict):
    """(``harness.models.Params``, record fields) of the ``model`` parameter: ``paper`` (the
    default, Table 4) or the path of a ``model_params.json`` (relative to the repository root
    or absolute), read once per process. The record fields name the model, its provenance
    source and the first 12 hex digits of the file's SHA-256."""
    import hashlib
    import json
    from pathlib import Path

    from ..models import Params  # lazily: every rank imports this module

    value = str(params.get("model", "paper"))
    if value == "paper":
        return Params.paper(), {"model": "paper Table 4",
                                "model_source": Params.paper().provenance["source"]}
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = paths.REPO_ROOT / path
    key = str(path.resolve())
    if key not in _MODELS:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            why = "no such file" if not path.exists() else (exc.strerror or str(exc))
            raise ValueError(f"parameter model: cannot read {value!r} ({path}): {why}; expected "
                             f"'paper' or the path of a model_params.json written by "
                             f"`harness fit <campaign>` (relative to the repository root "
                             f"or absolute)") from None
        try:
            mp = Params.from_dict(json.loads(raw))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"parameter model: {value!r} ({path}) is not a model_params.json "
                             f"(Params.to_dict() layout: ab, gamma, m_s, provenance): "
                             f"{type(exc).__name__}: {exc}") from None
        missing = [a for a in MODEL_TO_OPENMPI if a not in mp.ab]
        if len(missing) == len(MODEL_TO_OPENMPI):
            raise ValueError(f"parameter model: {value!r} ({path}) has no (alpha, beta) of any "
                             f"of {sorted(MODEL_TO_OPENMPI)}")
        _MODELS[key] = (mp, {"model": value,
                             "model_source": str(mp.provenance.get("source", "?")),
                             "model_sha256": hashlib.sha256(raw).hexdigest()[:12]})
    mp, rec = _MODELS[key]
    return mp, dict(rec)


def choose(procs: int, nbytes: int, params: dict) -> tuple[int, int, str, str, dict]:
    """(P_r, P_c, row algorithm, column algorithm, the model's view for the record) for
    ``procs`` processes and ``nbytes``."""
    from ..models import decide_suara2  # lazily: every rank imports this module

    grid = str(params.get("grid", "auto"))
    info: dict = {}
    if grid in ("auto", "best-grid"):
        mp, info = model_params(params)
        a_r, a_c, pr, pc, predicted, fallback = decide_suara2(
            procs, nbytes, mp, grids_only=grid == "best-grid")
        # the model's view, for the record: a prime P (no grid) or a predicted loss of every
        # grid runs the best single algorithm on all P processes (grid 1 x P)
        info = {"predicted": predicted, "fallback": fallback, **info}
        subs = str(params.get("subs", "harness"))
        if subs == "harness":
            ar, ac = MODEL_TO_HARNESS[a_r], MODEL_TO_HARNESS[a_c]
        elif subs == "native":
            ar, ac = MODEL_TO_OPENMPI[a_r], MODEL_TO_OPENMPI[a_c]
        else:
            raise ValueError(f"suara2: subs must be 'harness' or 'native', got {subs!r}")
    else:
        try:
            pr, pc = (int(x) for x in grid.lower().split("x"))
        except ValueError:
            raise ValueError(f"suara2: grid must be 'auto', 'best-grid' or '<P_r>x<P_c>', "
                             f"got {grid!r}") from None
        if pr < 1 or pc < 1 or pr * pc != procs:
            raise ValueError(f"suara2: grid {grid} does not arrange P={procs} processes")
        ar = ac = "ring"
    return pr, pc, str(params.get("row", ar)), str(params.get("col", ac)), info


_COMMS: dict = {}  # (kind, communicator handle, grid or name) -> communicators, per process


SMALL_MAX_DEFAULT = 1 << 20  # the paper's "1 MB" (Sect. 5), as 2^20 B like its "8 KB" = 8192 B


def small_rule(procs: int, nbytes: int, params: dict):
    """The paper's wrapper rule (Sect. 5: "for message sizes less than or equal to 1 MB, the
    SUARA2 Open MPI wrapper invokes the best native Open MPI algorithm"): with
    ``small=native-best`` and ``nbytes <= small_max``, ``(native:<name>, record fields)`` of the
    model's best single algorithm on all ``procs`` processes; else None."""
    from ..models import best_single  # lazily: every rank imports this module

    small = str(params.get("small", "off"))
    if small not in ("off", "native-best"):
        raise ValueError(f"parameter small: expected 'off' or 'native-best', got {small!r}")
    try:
        limit = parse_size(params.get("small_max", SMALL_MAX_DEFAULT))
    except ValueError as exc:
        raise ValueError(f"parameter small_max: {exc}") from None
    if small == "off" or nbytes > limit:
        return None
    mp, info = model_params(params)
    best, predicted = best_single(procs, nbytes, mp, tuple(a for a in MODEL_TO_OPENMPI if a in mp.ab))
    return MODEL_TO_OPENMPI[best], {"small_rule": True, "small_max": format_size(limit),
                                    "small_algorithm": best, "predicted": predicted,
                                    "fallback": "small", **info}


def grid_comms(ctx, comm, dims: tuple) -> tuple[list, float]:
    """One communicator per dimension of the grid ``dims`` over ``comm`` (ranks in row-major
    coordinates, the last dimension fastest; communicator l holds the ranks that differ only
    in coordinate l), and the time the splits took (slowest rank). Made once per (communicator,
    grid) and kept for the process (``_COMMS``; a cell's ``ctx`` lives for one cell only): the
    cells of one launch on the same grid reuse them (MPI has a few thousand communicator ids
    per process, and a 36-combination sweep has hundreds of cells)."""
    cache = _cache(ctx, comm)
    key = ("grid-comms", comm.py2f(), tuple(dims))
    if key not in cache:
        coords, r = [], comm.Get_rank()
        for d in reversed(dims):
            r, c = divmod(r, d)
            coords.append(c)
        coords = coords[::-1]
        comm.Barrier()
        clock = timer_of(comm)
        t0 = clock()
        comms = []
        for level in range(len(dims)):
            color = 0
            for d, c in zip(dims, coords[:level] + [0] + coords[level + 1:]):
                color = color * d + c
            comms.append(comm.Split(color, coords[level]))
        cache[key] = (comms, comm.allreduce(clock() - t0, op=_max(comm)))
    return cache[key]


def _cache(ctx, comm) -> dict:
    """Where the splits of ``comm`` are kept: the process-wide ``_COMMS`` for a real
    communicator; the cell's ``ctx`` for a wrapper such as the counting communicator
    (``harness/measure/counting.py``), made anew for every count and sharing the real one's handle,
    or a simulated one (``harness/simulate``: every rank's actor lives in one process)."""
    if getattr(comm, "MPI", None) is not None:
        return ctx.scratch
    from mpi4py import MPI

    return _COMMS if isinstance(comm, MPI.Comm) else ctx.scratch


def _stage(ctx, name: str, comm):
    """``_sub_algorithm`` once per (sub-communicator, name): Open MPI's forcing duplicates
    the communicator, which must not happen again for every cell."""
    cache = _cache(ctx, comm)
    key = ("stage", comm.py2f(), name)
    if key not in cache:
        cache[key] = _sub_algorithm(name, comm)
    return cache[key]


def prepare(comm, sendbuf, recvbuf, op, ctx):
    """Grid, sub-communicators and the intermediate buffer, made once and kept in ctx."""
    key = ("suara2", comm.py2f(), recvbuf.size, recvbuf.dtype.str)
    plan = ctx.scratch.get(key)
    if plan is None:
        sub_params = {k: v for k, v in ctx.params.items()
                      if k not in ("grid", "row", "col", "subs", "model", "small", "small_max")}
        small = small_rule(comm.Get_size(), recvbuf.nbytes, ctx.params)
        if small is not None:  # the paper's wrapper: the best native algorithm on everyone
            name, info = small
            f, c, how = _stage(ctx, name, comm)
            sub_ctx = Context(params=dict(sub_params))
            if getattr(f, "prepare", None):
                f.prepare(c, sendbuf, recvbuf, op, sub_ctx)
            plan = ctx.scratch[key] = (c, None, f, None, sub_ctx, None, None)
            ctx.scratch["record"] = {"P_r": 1, "P_c": comm.Get_size(), "row": name, "col": name,
                                     "row_forcing": how, "col_forcing": how, **info}
            return plan
        pr, pc, ar, ac, info = choose(comm.Get_size(), recvbuf.nbytes, ctx.params)
        (col, row), split = grid_comms(ctx, comm, (pr, pc))  # rows: P_c processes each
        if "small_max" in ctx.params or str(ctx.params.get("small", "off")) != "off":
            info["small_rule"] = False
        f_row, row_comm, row_how = _stage(ctx, ar, row)
        f_col, col_comm, col_how = _stage(ctx, ac, col)
        plan = (row_comm, col_comm, f_row, f_col,
                Context(params=dict(sub_params)), Context(params=dict(sub_params)),
                verify.aligned_empty(recvbuf.size, recvbuf.dtype.str))
        # a sub-allreduce's own set-up (shm's window) here too, never in a timed call
        for f, c, sub_ctx in ((f_row, row_comm, plan[4]), (f_col, col_comm, plan[5])):
            if getattr(f, "prepare", None):
                f.prepare(c, sendbuf, plan[6], op, sub_ctx)
        ctx.scratch[key] = plan
        ctx.scratch["record"] = {"P_r": pr, "P_c": pc, "row": ar, "col": ac,
                                 "row_forcing": row_how, "col_forcing": col_how,
                                 "split_seconds": split, **info}
    return plan


@register("suara2", family="suara",
          description="P_r x P_c grid: allreduce in the rows, then in the columns (SUARA2)")
def suara2(comm, sendbuf, recvbuf, op, ctx):
    row, col, f_row, f_col, ctx_row, ctx_col, mid = prepare(comm, sendbuf, recvbuf, op, ctx)
    if col is None:  # small=native-best below small_max: one native allreduce
        f_row(row, sendbuf, recvbuf, op, ctx_row)
        return
    f_row(row, sendbuf, mid, op, ctx_row)
    f_col(col, mid, recvbuf, op, ctx_col)


suara2.prepare = prepare


# ---------------------------------------------------------------------------------- SUARA-L

def choose_levels(procs: int, nbytes: int, params: dict) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(dimensions, sub-allreduce per dimension) of SUARA-L."""
    from ..models import select_suara_l  # lazily: every rank imports this module

    grid = str(params.get("grid", "auto"))
    if grid == "auto":
        levels = int(params.get("levels", 3))
        if levels < 2:
            raise ValueError(f"suara_l: levels must be >= 2, got {levels}")
        c = select_suara_l(procs, nbytes, model_params(params)[0], levels)
        table = MODEL_TO_OPENMPI if str(params.get("subs", "harness")) == "native" else MODEL_TO_HARNESS
        dims, algs = c.dims, tuple(table[a] for a in c.algs)
    else:
        try:
            dims = tuple(int(x) for x in grid.lower().split("x"))
        except ValueError:
            raise ValueError(f"suara_l: grid must be 'auto' or '<P_1>x<P_2>x...', got {grid!r}") from None
        if len(dims) < 2 or min(dims) < 1 or int(np.prod(dims)) != procs:
            raise ValueError(f"suara_l: grid {grid} does not arrange P={procs} processes")
        algs = (str(params.get("sub", "ring")),) * len(dims)
    if "subs_each" in params:  # one per dimension, comma-separated
        algs = tuple(str(params["subs_each"]).split(","))
        if len(algs) != len(dims):
            raise ValueError(f"suara_l: subs_each names {len(algs)} algorithms for {len(dims)} dimensions")
    return dims, algs


def prepare_levels(comm, sendbuf, recvbuf, op, ctx):
    """One communicator per dimension (ranks that differ only in that coordinate, row-major
    coordinates, the last dimension fastest) and two intermediate buffers, made once."""
    key = ("suara_l", comm.py2f(), recvbuf.size, recvbuf.dtype.str)
    plan = ctx.scratch.get(key)
    if plan is None:
        dims, names = choose_levels(comm.Get_size(), recvbuf.nbytes, ctx.params)
        comms, split = grid_comms(ctx, comm, dims)
        sub_params = {k: v for k, v in ctx.params.items()
                      if k not in ("grid", "levels", "sub", "subs", "subs_each")}
        stages, how = [], []
        sub_params.pop("model", None)
        for c, name in zip(comms, names):
            f, cc, mech = _stage(ctx, name, c)
            stages.append((f, cc, Context(params=dict(sub_params))))
            how.append(mech)
        bufs = (verify.aligned_empty(recvbuf.size, recvbuf.dtype.str),
                verify.aligned_empty(recvbuf.size, recvbuf.dtype.str))
        plan = ctx.scratch[key] = (stages, bufs)
        ctx.scratch["record"] = {"dims": "x".join(map(str, dims)), "subs": list(names),
                                 "forcing": how, "split_seconds": split}
        if str(ctx.params.get("grid", "auto")) == "auto":
            ctx.scratch["record"].update(model_params(ctx.params)[1])
    return plan


@register("suara_l", family="suara",
          description="L-dimensional grid (SUARA-L, e.g. R x C x K): an allreduce along each dimension in turn")
def suara_l(comm, sendbuf, recvbuf, op, ctx):
    stages, (a, b) = prepare_levels(comm, sendbuf, recvbuf, op, ctx)
    src = sendbuf
    last = len(stages) - 1
    for i, (f, c, sub_ctx) in enumerate(stages):
        dst = recvbuf if i == last else (a if i % 2 == 0 else b)
        f(c, src, dst, op, sub_ctx)
        src = dst


suara_l.prepare = prepare_levels


# -------------------------------------------------------------------------------- three-step

def choose_three(procs: int, params: dict) -> tuple[int, int]:
    """(P_r, P_c) of ``three_step``: ``grid`` ``auto`` / ``best-grid`` take the proper grid
    whose P_c is nearest sqrt(P) on a log scale (the smaller P_c on a tie), or ``1 x P`` when
    P has none (prime P: reduce-scatter + allgather over everyone, the 2-step decomposition);
    ``<P_r>x<P_c>`` is taken as given."""
    from ..models import divisors  # lazily: every rank imports this module

    grid = str(params.get("grid", "auto"))
    if grid in ("auto", "best-grid"):
        proper = [d for d in divisors(procs) if 1 < d < procs]
        if not proper:
            return 1, procs
        pc = min(proper, key=lambda d: (abs(np.log(d) - 0.5 * np.log(procs)), d))
        return procs // pc, pc
    try:
        pr, pc = (int(x) for x in grid.lower().split("x"))
    except ValueError:
        raise ValueError(f"three_step: grid must be 'auto', 'best-grid' or '<P_r>x<P_c>', "
                         f"got {grid!r}") from None
    if pr < 1 or pc < 1 or pr * pc != procs:
        raise ValueError(f"three_step: grid {grid} does not arrange P={procs} processes")
    return pr, pc


def prepare_three(comm, sendbuf, recvbuf, op, ctx):
    """Grid, communicators, block counts and displacements, the block buffer: made once."""
    key = ("three_step", comm.py2f(), recvbuf.size, recvbuf.dtype.str)
    plan = ctx.scratch.get(key)
    if plan is None:
        MPI = mpi_of(comm)
        pr, pc = choose_three(comm.Get_size(), ctx.params)
        (col, row), split = grid_comms(ctx, comm, (pr, pc))  # rows: P_c processes each
        name = str(ctx.params.get("col", "native"))
        f_col, col_comm, how = _stage(ctx, name, col)
        n, j = recvbuf.size, row.Get_rank()
        counts = [n // pc + (1 if i < n % pc else 0) for i in range(pc)]
        displs = [sum(counts[:i]) for i in range(pc)]
        block = verify.aligned_empty(counts[j], recvbuf.dtype.str)
        sub_ctx = Context(params={k: v for k, v in ctx.params.items() if k not in ("grid", "col")})
        lo, hi = displs[j], displs[j] + counts[j]
        if getattr(f_col, "prepare", None):
            f_col.prepare(col_comm, block, recvbuf[lo:hi], op, sub_ctx)
        mt = MPI._typedict[recvbuf.dtype.char]  # a predefined type (a user-defined one takes no MPI_SUM)
        plan = ctx.scratch[key] = (row, col_comm, f_col, sub_ctx, mt,
                                   counts, displs, block, lo, hi, MPI.IN_PLACE)
        ctx.scratch["record"] = {"P_r": pr, "P_c": pc, "col": name, "col_forcing": how,
                                 "block_elements": f"{min(counts)}..{max(counts)}",
                                 "split_seconds": split}
    return plan


@register("three_step", family="suara",
          description="P_r x P_c grid: reduce-scatter in each row, allreduce of one's block "
                      "along the column, allgather in the row (3-step baseline of SUARA2)")
def three_step(comm, sendbuf, recvbuf, op, ctx):
    """The 3-step decomposition the SUARA paper compares against (Sect. 5): on a P_r x P_c
    grid (rows of P_c processes), ``MPI_Reduce_scatter`` in each row leaves process j of the
    row the row's partial sum of block j (blocks of ``count // P_c`` elements, the first
    ``count % P_c`` one larger), the allreduce of that block along the column (``col``:
    ``native`` by default, or any sub-allreduce SUARA2 accepts) completes it, and
    ``MPI_Allgatherv`` in the row assembles the whole vector. Grid ``1 x P`` is the 2-step
    decomposition (reduce-scatter, allgather); ``P x 1`` is one allreduce."""
    row, col, f_col, sub_ctx, mt, counts, displs, block, lo, hi, in_place = prepare_three(
        comm, sendbuf, recvbuf, op, ctx)
    row.Reduce_scatter([sendbuf, mt], [block, mt], counts, op)
    f_col(col, block, recvbuf[lo:hi], op, sub_ctx)
    row.Allgatherv(in_place, [recvbuf, counts, displs, mt])


three_step.prepare = prepare_three
