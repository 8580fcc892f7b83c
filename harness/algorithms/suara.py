"""SUARA2 (Nuriyev et al. 2023, Sect. 4.2-4.5, Algorithm 1): the P processes form a
P_r x P_c grid; an allreduce runs in every process row (P_c processes each, algorithm a_r),
then in every process column (P_r processes, algorithm a_c) on the rows' results.

Parameters (``ctx.params``):
- ``grid``: ``"auto"`` (default: the model's choice, ``harness.models.select_suara2`` with the
  paper's Table 4 parameters) or ``"<P_r>x<P_c>"`` (the manual override Fig. 7 sweeps);
- ``row`` / ``col``: the sub-allreduce of each dimension, a harness algorithm (``ring``,
  ``segmented_ring``, …) or ``native`` (the library's MPI_Allreduce on the sub-communicator,
  as the launch environment forces it). With ``grid: auto`` they default to the model's pick.

The row and column communicators are split once per (communicator, grid) and reused; the
bench calls ``prepare`` before the warm-up, so the split is never in a timed repetition.
When no grid 1 < P_c < P exists (P prime, or the model prefers one algorithm), ``auto`` runs
the grid (1, P): one row with every process, which is the single algorithm.
"""

from __future__ import annotations

from . import REGISTRY, register

MODEL_TO_HARNESS = {"linear": "linear", "nono": "nonoverlapping", "rd": "recursive_doubling",
                    "rnos": "ring", "rs": "segmented_ring", "rab": "rabenseifner"}


def _sub_algorithm(name: str):
    if name == "native":
        from .native import native_allreduce

        return native_allreduce
    if name not in REGISTRY or name.startswith("suara"):
        raise ValueError(f"suara2: unknown sub-allreduce {name!r}; valid: native, "
                         + ", ".join(sorted(n for n in REGISTRY if not n.startswith("suara"))))
    return REGISTRY[name].fn


def choose(procs: int, nbytes: int, params: dict) -> tuple[int, int, str, str]:
    """(P_r, P_c, row algorithm, column algorithm) for ``procs`` processes and ``nbytes``."""
    grid = str(params.get("grid", "auto"))
    if grid == "auto":
        from ..models import Params, decide_suara2

        a_r, a_c, pr, pc, _, _ = decide_suara2(procs, nbytes, Params.paper())
        ar, ac = MODEL_TO_HARNESS[a_r], MODEL_TO_HARNESS[a_c]
    else:
        try:
            pr, pc = (int(x) for x in grid.lower().split("x"))
        except ValueError:
            raise ValueError(f"suara2: grid must be 'auto' or '<P_r>x<P_c>', got {grid!r}") from None
        if pr < 1 or pc < 1 or pr * pc != procs:
            raise ValueError(f"suara2: grid {grid} does not arrange P={procs} processes")
        ar = ac = "ring"
    return pr, pc, str(params.get("row", ar)), str(params.get("col", ac))


def prepare(comm, sendbuf, recvbuf, op, ctx):
    """Grid, sub-communicators and the intermediate buffer, made once and kept in ctx."""
    key = ("suara2", comm.py2f(), recvbuf.size, recvbuf.dtype.str)
    plan = ctx.scratch.get(key)
    if plan is None:
        from .. import verify
        from . import Context

        procs, rank = comm.Get_size(), comm.Get_rank()
        grid_key = ("suara2-grid", comm.py2f(), recvbuf.nbytes)
        if grid_key not in ctx.scratch:
            pr, pc, ar, ac = choose(procs, recvbuf.nbytes, ctx.params)
            myr, myc = divmod(rank, pc)
            row = comm.Split(myr, myc)  # P_r rows of P_c processes
            col = comm.Split(myc, myr)  # P_c columns of P_r processes
            ctx.scratch[grid_key] = (pr, pc, ar, ac, row, col)
        pr, pc, ar, ac, row, col = ctx.scratch[grid_key]
        sub_params = {k: v for k, v in ctx.params.items() if k not in ("grid", "row", "col")}
        plan = (row, col, _sub_algorithm(ar), _sub_algorithm(ac),
                Context(params=dict(sub_params)), Context(params=dict(sub_params)),
                verify.aligned_empty(recvbuf.size, recvbuf.dtype.str))
        ctx.scratch[key] = plan
        ctx.scratch["record"] = {"P_r": pr, "P_c": pc, "row": ar, "col": ac}
    return plan


@register("suara2", family="suara",
          description="P_r x P_c grid: allreduce in the rows, then in the columns (SUARA2)")
def suara2(comm, sendbuf, recvbuf, op, ctx):
    row, col, f_row, f_col, ctx_row, ctx_col, mid = prepare(comm, sendbuf, recvbuf, op, ctx)
    f_row(row, sendbuf, mid, op, ctx_row)
    f_col(col, mid, recvbuf, op, ctx_col)


suara2.prepare = prepare
