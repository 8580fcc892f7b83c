"""Cost models of allreduce algorithms (``docs/models.md``).

- ``hockney.py``: the Hockney models of Open MPI's six allreduce algorithms (SUARA paper,
  Table 1): the paper's parameters (``PAPER_*``, ``Params.paper()``), ``Params``,
  ``coefficients``, ``cost``, ``stage_cost`` and ``basis`` (a model as a function of the
  process count), ``best_single``, ``ALL6``;
- ``suara.py``: SUARA2 (eq. 9, Algorithm 2: ``suara2_cost``, ``select_suara2`` with its
  tables, ``decide_suara2`` alone, ``brute_force_suara2``, ``padded_grid``) and SUARA-L
  (``factorizations``, ``select_suara_l``);
- ``fitting.py``: (alpha, beta) fitted to measured means (``fit``, ``fit_all``), gamma
  (``fit_gamma``, ``measure_gamma``), the summary-name maps ``NATIVE_OPENMPI`` and ``HARNESS``;
- ``maxrate.py``: the max-rate model of RD, SMP and NAP (Bienz et al.), imported as
  ``harness.models.maxrate`` (not re-exported here).

The public names of ``hockney``, ``suara`` and ``fitting`` are re-exported, so
``models.Params``, ``models.select_suara2``, ``models.measure_gamma`` name them here. The
harness calls ``measure_gamma`` through this package (``models.measure_gamma()``), which is
the binding tests pin (``tests/golden_support.py``).
"""

from .fitting import HARNESS, NATIVE_OPENMPI, fit, fit_all, fit_gamma, measure_gamma, r_squared
from .hockney import (
    ALL6,
    PAPER_ALPHA_RS,
    PAPER_BETA_RS,
    PAPER_GAMMA,
    PAPER_MS,
    Params,
    basis,
    best_single,
    coefficients,
    cost,
    plain_json,
    resolve_algorithms,
    stage_cost,
)
from .suara import (
    Candidate,
    Choice,
    LevelChoice,
    PaddedGrid,
    analytical_formula,
    brute_force_suara2,
    decide_suara2,
    divisors,
    factorizations,
    padded_grid,
    select_suara2,
    select_suara_l,
    suara2_cost,
)

__all__ = [
    # hockney
    "ALL6", "PAPER_ALPHA_RS", "PAPER_BETA_RS", "PAPER_GAMMA", "PAPER_MS", "Params", "basis",
    "best_single", "coefficients", "cost", "plain_json", "resolve_algorithms", "stage_cost",
    # suara
    "Candidate", "Choice", "LevelChoice", "PaddedGrid", "analytical_formula", "brute_force_suara2",
    "decide_suara2", "divisors", "factorizations", "padded_grid", "select_suara2", "select_suara_l",
    "suara2_cost",
    # fitting
    "HARNESS", "NATIVE_OPENMPI", "fit", "fit_all", "fit_gamma", "measure_gamma", "r_squared",
]
