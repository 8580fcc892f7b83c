"""A campaign's config and its runs: ``harness plan`` expands the config into cells and runs
and counts them; ``harness exec`` executes one rendered run (the workflow's measure step)."""

from __future__ import annotations

import os
import sys

from .. import fileio
from ..campaign import config, plan, runner
from ..results import store as results
from ..units import parse_time
from .args import typed


def register(sub) -> None:
    """Add ``plan`` and ``exec`` to the subparsers ``sub``."""
    p = sub.add_parser("plan", help="check the config, expand it to cells and runs, print counts",
                       description="Validate the config and expand it: cells per experiment, "
                                   "runs (one MPI launch each), with --runs the list of runs.")
    p.add_argument("--config", default=None, help="config file (default config/experiments.yaml)")
    p.add_argument("--runs", action="store_true", help="list every run")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("exec", help="execute a rendered run spec (used by the workflow)")
    p.add_argument("spec", help="results/<campaign>/jobs/<run>.json")
    p.add_argument("--timeout", type=typed(parse_time, "time"), default=None,
                   help="wall-time limit; past it the run is killed and recorded as timeout")
    p.set_defaults(func=cmd_exec)


def _load_config(args, parser):
    try:
        cfg = config.load(args.config)
        runs, unlaunched = plan.partition(cfg)
    except config.ConfigError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    return cfg, runs, unlaunched


def _not_applicable(unlaunched) -> str:
    n = sum(len(u.run.cells) for u in unlaunched)
    return f"  + {n} not applicable (recorded, never launched)" if n else ""


def cmd_plan(args, parser) -> int:
    cfg, runs, unlaunched = _load_config(args, parser)
    print(f"campaign {cfg.campaign} ({cfg.source}, config {cfg.digest})")
    cells_by_exp = {}
    for ex in cfg.experiments:  # per experiment, before cells shared with another are merged
        sub = type(cfg)(**{**cfg.__dict__, "experiments": (ex,)})
        ex_runs, ex_na = (runs, unlaunched) if len(cfg.experiments) == 1 else plan.partition(sub)
        cells_by_exp[ex.name] = (sum(len(r.cells) for r in ex_runs if r.launch == 0), len(ex_runs),
                                 _not_applicable(ex_na))
    width = max(len(n) for n in cells_by_exp)
    for name, (ncells, nruns, na) in cells_by_exp.items():
        ex = next(e for e in cfg.experiments if e.name == name)
        where = f"  simulated on {ex.platform}" if ex.platform else ""
        print(f"  {name:<{width}}  {ncells:>8} cells  {nruns:>6} runs{na}{where}")
    total = sum(len(r.cells) for r in runs if r.launch == 0)
    launches = int(cfg.stopping.get("launches", 1))
    print(f"  {'total':<{width}}  {total:>8} cells  {len(runs):>6} runs (cells shared by "
          f"experiments are measured once" + (f"; {launches} launches of each run" if launches > 1
                                              else "") + ")" + _not_applicable(unlaunched))
    for name, e in (cfg.sgd or {}).items():  # distributed SGD (harness/measure/sgd.py, harness/campaign/sgd_stage.py, docs/sgd.md)
        algs = list(e["algorithms"])
        print(f"  sgd {name}: {e['library']} P={e['procs']}, {', '.join(algs)} x "
              f"{e['executions']} executions = {len(algs) * e['executions']} training launches "
              f"of {e['iterations']} iterations")
    if args.runs:
        cores = os.cpu_count() or 1
        for r in runs:
            local = cfg.launch != "srun" and not cfg.libraries.get(r.library) and not r.platform
            forced = " ".join(f"{k}={v}" for k, v in r.env) or "-"
            if r.platform:
                forced = f"simulated on platform {r.platform}"
            over = (f"  {r.procs / cores:.1f} ranks/core" if local and r.procs > cores else "")
            print(f"{r.run_id}  {r.library:8} P={r.procs:<4} nodes={r.nodes:<3} "
                  f"launch={r.launch:<3} {len(r.cells):>5} cells  {forced}{over}")
        for u in unlaunched:
            r = u.run
            print(f"{u.run_id}  {r.library:8} P={r.procs:<4} nodes={r.nodes:<3} "
                  f"{'':10} {len(r.cells):>5} cells  not applicable, never launched")
    return 0


def cmd_exec(args, parser) -> int:
    """Execute a rendered run (the workflow's measure step)."""
    spec = fileio.read_json(args.spec)
    store = results.CampaignStore.of_spec(args.spec)
    try:
        outcome = runner.execute(store, spec, timeout=args.timeout)
    except OSError as exc:  # a full or read-only file system: one line, nothing half-written
        print(f"harness exec: run {spec['run_id']}: cannot write "
              f"{exc.filename or 'the results store'}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"run {spec['run_id']}: {outcome}")
    return 0
