"""The experiment matrix of a config expanded into runs (``expand``), replicated into
launches, with each run's forcing environment and library (cells and runs: ``cells.py``);
the cells outside their native algorithm's ``applies`` condition, never launched
(``partition``, ``NotApplicable``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .. import paths
from ..algorithms import harness_names, p2p_bench
from ..cells import Cell, Run, resolve_thread_level
from ..dnn import workload
from ..errors import ConfigError
from ..libraries import get_library
from ..measure.buffers import check as check_buffers
from ..measure.preflight import identified
from ..measure.verification import refusing
from . import simulation


def expand_algorithms(patterns, lib, where: str) -> list[str]:
    """Names matched by ``patterns`` (globs such as ``native:*``) for library ``lib``."""
    from fnmatch import fnmatchcase

    known = lib.native_names() + harness_names()
    out: list[str] = []
    for i, pat in enumerate(patterns):
        hits = [n for n in known if fnmatchcase(n, pat)]
        if pat in lib.selector_names():  # named explicitly only, never by a glob
            hits = [pat]
        if not hits:
            lacks, name = "", pat[len("native:"):]
            if pat.startswith("native:") and name in (lib.refused or {}):
                lacks = f" (refused: its {lib.refused[name]})"
            elif pat.startswith("native:") and name in lib.algorithms and not lib.has(name):
                lacks = f" (the library, {lib.version}, does not have it)"
            raise ConfigError(f"{where}[{i}]: {pat!r} matches no algorithm of {lib.name}{lacks}; "
                              f"valid: {', '.join(known + lib.selector_names())}")
        out.extend(h for h in hits if h not in out)
    return out


def expand(cfg) -> list[Run]:
    """Every cell of every experiment of ``cfg``, grouped into runs (one MPI launch each):
    same library, forcing environment, P and node count. A cell asked for by several
    experiments is measured once. Runs and their cells come in a stable order. Cells outside
    their native algorithm's ``applies`` condition are in no run (``partition``)."""
    return partition(cfg)[0]


@dataclass(frozen=True)
class NotApplicable:
    """The cells of one would-be run (``run``) that the catalogue's ``applies`` condition of
    their native algorithm excludes: the library would silently run another algorithm. They
    are never launched; their run document (``results.not_applicable_doc``) records each
    ``not-applicable`` with ``reasons[cell id]``, the text ``NativeAlgorithm.not_applicable``
    gives."""

    run: Run
    reasons: dict

    @property
    def run_id(self) -> str:
        """Never the id of a launched run (``r`` + 12 hex digits, as the workflow expects)."""
        return "r" + hashlib.sha1(f"{self.run.run_id}:not-applicable".encode()).hexdigest()[:12]


def not_applicable(lib, cell: Cell) -> str | None:
    """Why ``cell`` is outside its native algorithm's ``applies`` condition in ``lib``
    (``NativeAlgorithm.not_applicable``; a workload cell when any of its calls' counts is),
    or None."""
    if not cell.algorithm.startswith("native:"):
        return None
    entry = lib.native(cell.algorithm)
    counts = (sorted(set(workload.counts(cell.params, cell.dtype)))
              if workload.is_workload(cell.params) else [cell.count])
    itemsize = np.dtype(cell.dtype).itemsize
    return next(filter(None, (entry.not_applicable(n, cell.procs, itemsize) for n in counts)), None)


def partition(cfg) -> tuple[list[Run], list[NotApplicable]]:
    """(the runs of ``cfg``, replicated into its launches; the cells no run launches, per
    would-be run, in a stable order): see ``expand`` and ``NotApplicable``."""
    groups: dict[tuple, dict[str, Cell]] = {}
    skipped: dict[tuple, dict[str, tuple]] = {}
    for ex in cfg.experiments:
        delay_settings = []
        for mode in ex.delays:
            if mode == "none":
                delay_settings.append(("none", 0.0))
            else:
                delay_settings.extend((mode, t) for t in ex.max_delays if t > 0)
        simulated = cfg.platforms[ex.platform] if ex.platform else None
        if simulated:
            simulation.check(ex, cfg.source)
        for libname in ex.libraries:
            lib = get_library(libname) if simulated else library_for(cfg, libname)
            algorithms = expand_algorithms(ex.algorithms, lib,
                                           f"{cfg.source}: experiments.{ex.name}.algorithms")
            for alg in algorithms:
                for procs in ex.procs:
                    for dtype in ex.dtypes:
                        for op in ex.ops:
                            for mode, max_delay in delay_settings:
                                for size, params in sized_param_sets(ex, dtype, cfg.source):
                                    try:
                                        level = resolve_thread_level(ex.thread_level, alg, params)
                                    except ValueError as exc:
                                        raise ConfigError(
                                            f"{cfg.source}: experiments.{ex.name}.thread_level: "
                                            f"{exc}") from None
                                    if ex.timing == "imb" and (mode != "none" or
                                                               "compute" in dict(params)):
                                        raise ConfigError(
                                            f"{cfg.source}: experiments.{ex.name}.timing: 'imb' "
                                            f"times calls back to back and takes no delay mode "
                                            f"or compute phase, got delay {mode!r}")
                                    try:  # ping-pong / local reduction parameters
                                        p2p_bench.check(alg, params, procs, ex.timing, mode)
                                        check_buffers(alg, params, ex.buffers)
                                    except ValueError as exc:
                                        raise ConfigError(
                                            f"{cfg.source}: experiments.{ex.name}: {exc}"
                                        ) from None
                                    nodes = simulated.nodes_for(procs) if simulated else ex.nodes
                                    cell = Cell(libname, alg, procs, size, dtype, op, mode,
                                                max_delay,
                                                ex.late_rank if mode == "one-late" else 0,
                                                nodes, params, level, ex.timing,
                                                ex.buffers,
                                                simulated.platform_id if simulated else "")
                                    try:
                                        env = () if simulated else launch_env(lib, alg, params)
                                    except KeyError as exc:
                                        raise ConfigError(
                                            f"{cfg.source}: experiments.{ex.name}.params: "
                                            f"{exc.args[0]}") from None
                                    key = (libname, env, procs, nodes, level, cell.platform)
                                    # a simulated one also where SMPI has no copy of it
                                    reason = ((simulated and simulation.not_simulable(lib, cell))
                                              or not_applicable(lib, cell))
                                    if reason:  # decided here: never launched
                                        skipped.setdefault(key, {}).setdefault(
                                            cell.cell_id, (cell, reason))
                                    else:
                                        groups.setdefault(key, {}).setdefault(cell.cell_id, cell)
    runs = [Run(library=k[0], env=k[1], procs=k[2], nodes=k[3], cells=tuple(v.values()),
                thread_level=k[4], platform=k[5])
            for k, v in groups.items()]
    unlaunched = [NotApplicable(Run(library=k[0], env=k[1], procs=k[2], nodes=k[3],
                                    cells=tuple(c for c, _ in v.values()), thread_level=k[4],
                                    platform=k[5]),
                                {cid: why for cid, (_, why) in v.items()})
                  for k, v in skipped.items()]
    return replicate(runs, int(cfg.stopping.get("launches", 1)), cfg.seed), unlaunched


def replicate(runs, launches: int, seed: int = 0) -> list[Run]:
    """``launches`` independent MPI launches of every run (``launch`` 0..R-1, distinct run
    ids; launch 0 keeps the id a single launch has, so raising R keeps what was measured).
    With R > 1 the cells of each launch come in a seeded random order, so no cell is always
    measured first or right after the same neighbour. Launch-major order: every run's first
    launch, then every run's second, so a run's launches are spread over the campaign."""
    import random
    from dataclasses import replace

    if launches <= 1:
        return list(runs)
    out = []
    for k in range(launches):
        for r in runs:
            if k and r.platform:  # a simulation is deterministic: one is every launch
                continue
            cells = list(r.cells)
            random.Random(f"{seed}:{k}:{r.run_id}").shuffle(cells)
            out.append(replace(r, cells=tuple(cells), launch=k))
    return out


def launch_env(lib, algorithm: str, params: tuple = ()) -> tuple:
    """The launch environment that forces a cell's algorithm, as sorted (name, value) pairs:
    a native entry's own; for a harness algorithm whose two sub-allreduces are the same
    native entry (SUARA2 ``row`` = ``col`` = ``native:<name>``), that entry's, since the
    launch environment is the one forcing every library honours; else none."""
    if algorithm == "native:tuned":
        campaign = dict(params).get("tuning")
        if not campaign:
            raise KeyError("native:tuned needs the parameter tuning=<campaign>: the campaign "
                           "whose `harness tune` files load")
        from . import tune  # pandas: only for native:tuned (not on every `harness exec`)

        return tuple(sorted(tune.environment(paths.results_root(), str(campaign),
                                             lib.name).items()))
    if algorithm.startswith("native:"):
        return tuple(sorted(lib.native(algorithm).env.items()))

    try:  # a ping-pong / local reduction cell's parameters (P is checked at the launch)
        p2p_bench.check(algorithm, params)
    except ValueError as exc:
        raise KeyError(str(exc)) from None
    p = dict(params)
    row, col = p.get("row"), p.get("col")
    if isinstance(row, str) and row == col and row.startswith("native:"):
        return tuple(sorted(lib.native(row).env.items()))
    return ()


def sized_param_sets(ex, dtype: str, source: str) -> list[tuple]:
    """(size, params) of every cell of an experiment for one dtype: each size with each
    parameter set, or for a workload parameter set (``harness.dnn.workload``) the size of
    its iteration."""

    out = []
    for params in param_sets(ex.params):
        if workload.is_workload(params):
            try:
                out.append((workload.size(params, dtype), params))
            except ValueError as exc:
                raise ConfigError(f"{source}: experiments.{ex.name}.workload: {exc}") from None
            continue
        for size in ex.sizes:
            if size % np.dtype(dtype).itemsize:
                raise ConfigError(f"{source}: experiments.{ex.name}.sizes: {size} bytes is not a "
                                  f"whole number of {dtype} elements")
            out.append((size, params))
    return out


def param_sets(params: tuple) -> list[tuple]:
    """Every combination of an experiment's parameters: a list value is a sweep (one cell per
    item), a scalar is fixed. ``(("grid", ["2x3", "3x2"]), ("row", "ring"))`` gives two sets."""
    from itertools import product

    keys = [k for k, _ in params]
    values = [list(v) if isinstance(v, (list, tuple)) else [v] for _, v in params]
    return [tuple(zip(keys, combo)) for combo in product(*values)]


def library_for(cfg, name: str):
    """The installation ``name`` as the config describes it: the site's setup and launcher if
    the config has a ``libraries.<name>`` entry, else the local wheel, launched with srun when
    the config says ``launch: srun``. A declared installation is read first
    (``harness.measure.preflight.discover``, one process, no launcher): its catalogue is what
    the library has, and a family that does not match is an InstallationError (ConfigError)."""
    if cfg.simulated(name):  # SMPI's copy of a family: nothing to read, nothing to launch
        return get_library(name)
    return installation(name, cfg.libraries.get(name), cfg.launch)


def installation(name: str, site: dict | None, launch: str, refuse: bool = True):
    """``library_for`` from its parts: the declaration ``site`` (None: the wheel) and the
    config's ``launch`` (``srun`` launches a wheel with srun)."""
    from dataclasses import replace

    lib = get_library(name, site)
    if not site and launch == "srun":
        lib = replace(lib, launcher=SRUN)
    if lib.declared:  # a site's library: what it is and can force, read from it
        lib = identified(lib)
    # without what its verification found to run something else (``harness algorithms
    # --verify`` checks those again: ``refuse=False``)
    return refusing(lib) if refuse else lib


# --kill-on-bad-exit: a rank that dies (e.g. in MPI_Init) ends the step instead of leaving the
# others waiting until the wall-time limit
SRUN = ("srun", "--mpi=pmi2", "--nodes={nodes}", "--ntasks={procs}", "--kill-on-bad-exit=1")
