"""The cost models from the command line: ``harness model suara2`` (SUARA2's choice),
``harness model rd|smp|nap`` (the max-rate model), ``harness model project`` (the models'
predictions up to large P), and ``harness fit`` (their parameters fitted to a campaign)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from .. import fileio, models, paths
from ..analysis import netparams
from ..libraries import FAMILIES, split_name
from ..models import maxrate
from ..results import store as results
from ..units import format_size, format_time, parse_size
from .args import OneLineErrorParser, int_at_least, positive_float, typed


def register(sub) -> None:
    """Add ``model`` (``suara2``, ``rd``, ``smp``, ``nap``, ``project``) and ``fit`` to the
    subparsers ``sub``."""
    p = sub.add_parser("model", help="cost models: SUARA2's choice; max-rate RD, SMP, NAP")
    msub = p.add_subparsers(dest="model", required=True, parser_class=OneLineErrorParser)
    q = msub.add_parser("suara2", help="SUARA2 selection (Algorithm 2) for P and a message size",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    q.add_argument("--procs", "-n", type=int_at_least(1), required=True)
    q.add_argument("--size", type=typed(parse_size, "size"), required=True)
    q.add_argument("--params", default="paper",
                   help="'paper' (SUARA Table 4) or a JSON file of fitted parameters")
    q.add_argument("--rs-segments", choices=["stage", "global"], default=None,
                   help="rs segment count per stage m/(m_s n) (eqs. 7, 9, 13) or over all P as "
                        "eq. (11) writes it (default: the parameters', 'stage' for paper)")
    q.set_defaults(func=cmd_model_suara2)
    _add_maxrate(msub)
    q = msub.add_parser("project", help="the models' predictions past the cluster, up to "
                        "--max-procs: SUARA2 vs the best single algorithm, RD/SMP/NAP",
                        description="Maps over (P, size) of the winner predicted by the Hockney "
                                    "models (SUARA2 vs Open MPI's six algorithms) and the max-rate "
                                    "model (RD, SMP, NAP), SUARA2's speedup against P with a "
                                    "sqrt(P) fit, and a table; the campaign's measured region is "
                                    "outlined. Writes figures/<campaign>/projection_*.{png,pdf} and "
                                    "results/<campaign>/tables/projection.{md,tex,csv}.",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    q.add_argument("--params", default=None,
                   help="JSON file: harness fit's model_params.json (Hockney keys, optional "
                        "'maxrate' object), or 'paper' (Table 4 and illustrative max-rate "
                        "values); default the campaign's model_params.json, else 'paper'")
    q.add_argument("--campaign", default="adhoc",
                   help="campaign whose measured region is outlined and whose files are written")
    q.add_argument("--max-procs", type=int_at_least(4), default=16384, help="largest P")
    q.add_argument("--ppn", type=int_at_least(2), default=16,
                   help="processes per node of the RD/SMP/NAP map (the campaign's ppn values too)")
    q.set_defaults(func=cmd_model_project)
    p = sub.add_parser("fit", help="fit the Hockney models (alpha, beta per algorithm, gamma) "
                       "to a campaign's summary", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Linear regression of each Table 1 model over the campaign's "
                                   "native allreduce cells (P and m varied); from ping-pong cells "
                                   "Hockney alpha, beta per library and the max-rate parameters; "
                                   "gamma from the reduce_local cells (else a timed local "
                                   "reduction here). Writes results/<campaign>/model_params.json, "
                                   "usable as `harness model suara2|rd|smp|nap --params FILE`.")
    p.add_argument("campaign", help="campaign name (results/<campaign>/summary.csv)")
    p.add_argument("--library", default="openmpi", type=_family_library,
                   help="library of the Table 1 fit and of the max-rate parameters: mpich, "
                        "openmpi, impi, or a simulated <family>@<platform> (openmpi@shaheen)")
    p.add_argument("--source", default="native", choices=["native", "harness"],
                   help="fit Open MPI's native algorithms or the harness's own")
    p.add_argument("--gamma", type=positive_float, default=None,
                   help="gamma in s/B (default: from the reduce_local cells, else measured "
                        "here with a local reduction)")
    p.add_argument("--output", "-o", default=None, help="output JSON (default results/<campaign>/model_params.json)")
    p.set_defaults(func=cmd_fit)


def cmd_model_suara2(args, parser) -> int:
    if args.params == "paper":
        params = models.Params.paper()
    else:
        try:
            params = models.Params.from_dict(fileio.read_json(args.params))
        except (OSError, ValueError, KeyError) as exc:
            parser.error(f"argument --params: cannot read {args.params!r}: {exc}")
    if args.rs_segments:
        params = replace(params, rs_segments=args.rs_segments)
    c = models.select_suara2(args.procs, args.size, params)
    rs = models.cost("rs", args.procs, args.size, params) if "rs" in params.algorithms else None
    print(f"SUARA2 model, P={args.procs}, m={format_size(args.size)}, parameters: {args.params}")
    if c.fallback == "no-grid":
        print(f"  no grid 1 < P_c < P divides P={args.procs}: best single algorithm "
              f"{c.best_single} {format_time(c.best_single_time)}")
    else:
        grid = c.best_grid if c.fallback == "single" else c
        print(f"  grid P_r x P_c = {grid.P_r} x {grid.P_c}, combination ({grid.a_r}, {grid.a_c}), "
              f"predicted {format_time(grid.time)}")
        print(f"  best single algorithm {c.best_single}: {format_time(c.best_single_time)}; "
              f"predicted speedup {c.best_single_time / grid.time:.3f}")
        if rs:
            print(f"  single-level segmented ring (rs): {format_time(rs)}; "
                  f"predicted speedup over rs {rs / grid.time:.3f}")
        if c.fallback == "single":
            print("  the model prefers the single algorithm at this P and size")
    return 0


MAXRATE_OPTIONS = (("alpha_l", "--alpha-l", "s", "intra-node latency"),
                   ("beta_l", "--beta-l", "s/B", "intra-node cost per byte"),
                   ("alpha", "--alpha", "s", "inter-node latency"),
                   ("R_b", "--rb", "B/s", "inter-process bandwidth (1/beta)"),
                   ("R_N", "--rn", "B/s", "injection bandwidth of a node"),
                   ("gamma", "--gamma", "s/B", "reduction cost per byte"))


def cmd_model_maxrate(args, parser) -> int:
    """``harness model rd|smp|nap``: the max-rate model (harness/models/maxrate.py) for one case."""
    params = maxrate.MaxRateParams.defaults()
    source = "defaults (illustrative)"
    if args.params:
        try:
            params = maxrate.MaxRateParams.from_dict(fileio.read_json(args.params))
        except (OSError, ValueError) as exc:
            parser.error(f"argument --params: cannot use {args.params!r}: {exc}")
        source = args.params
    given = {}
    for key, flag, *_ in MAXRATE_OPTIONS:
        value = getattr(args, key)
        if value is None:
            continue
        try:
            params = maxrate.MaxRateParams.from_dict({key: value}, base=params)
        except ValueError as exc:
            parser.error(f"argument {flag}: {exc}")
        given[key] = value
    if given:
        source += " + " + ", ".join(given)
    if (args.procs is None) == (args.nodes is None):
        parser.error("give exactly one of --procs and --nodes")
    if args.nodes is None:
        if args.procs % args.ppn:
            parser.error(f"argument --procs: P={args.procs} is not a multiple of --ppn {args.ppn}")
        nodes = args.procs // args.ppn
    else:
        nodes = args.nodes
    if args.model == "nap" and args.ppn < 2 and nodes > 1:
        parser.error(f"argument --ppn: NAP needs ppn >= 2 (log_ppn n is undefined), got {args.ppn}")
    eq = {"rd": 4, "smp": 5, "nap": 6}
    c = maxrate.cost(args.model, nodes, args.ppn, args.size, params, args.steps)
    inter = "(alpha + s/R_b)" if args.model == "smp" else "(alpha + ppn s/min(R_N, ppn R_b))"
    print(f"{args.model.upper()} max-rate model (Bienz et al., eq. {eq[args.model]}): "
          f"P={nodes * args.ppn} = {nodes} node(s) x {args.ppn}, s={format_size(args.size)}, "
          f"steps: {args.steps}")
    print(f"  intra-node  {c.intra_steps:.4g} x (alpha_l + beta_l s) = {format_time(c.intra)}")
    print(f"  inter-node  {c.inter_steps:.4g} x {inter} = {format_time(c.inter)}")
    print(f"  reduction   {c.compute_steps:.4g} x gamma s = {format_time(c.compute)}")
    print(f"  predicted   {format_time(c.total)}")
    others = []
    for name in maxrate.ALGORITHMS:
        if name == "nap" and args.ppn < 2 and nodes > 1:
            continue
        others.append(f"{name.upper()} {format_time(maxrate.cost(name, nodes, args.ppn, args.size, params, args.steps).total)}")
    print("  all three:  " + ", ".join(others))
    print("  parameters: " + ", ".join(f"{key}={getattr(params, key):g} {unit}"
                                       for key, _, unit, _ in MAXRATE_OPTIONS) + f" ({source})")
    return 0


def _add_maxrate(msub) -> None:
    names = {"rd": "recursive doubling (eq. 4)", "smp": "SMP, master per node (eq. 5)",
             "nap": "node-aware parallel NAP (eq. 6)"}
    for name, what in names.items():
        q = msub.add_parser(name, help=f"max-rate model of {what} (Bienz et al.)",
                            description=f"Predicted cost of {what} with the max-rate model "
                                        "(harness/models/maxrate.py); every parameter can be set.",
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        q.add_argument("--procs", "-n", type=int_at_least(1), default=None,
                       help="processes P (or give --nodes)")
        q.add_argument("--nodes", type=int_at_least(1), default=None, help="nodes n")
        q.add_argument("--ppn", type=int_at_least(1), required=True, help="processes per node")
        q.add_argument("--size", type=typed(parse_size, "size"), required=True,
                       help="bytes per process, e.g. 8B, 2KiB")
        q.add_argument("--steps", choices=("paper", "ceil"), default="paper",
                       help="real-valued logarithms as printed, or whole steps")
        q.add_argument("--params", default=None,
                       help="JSON file with any of alpha_l, beta_l, alpha, R_b, R_N, gamma, or "
                            "results/<c>/model_params.json of `harness fit` (its maxrate section)")
        for key, flag, unit, text in MAXRATE_OPTIONS:
            q.add_argument(flag, dest=key, type=typed(float, "number"), default=None,
                           help=f"{text} ({unit}); default from --params or the defaults")
        q.set_defaults(func=cmd_model_maxrate)


def cmd_model_project(args, parser) -> int:
    """``harness model project``: the models' predictions up to --max-procs (figures, table)."""
    from ..report import projection, tables  # matplotlib: only when drawn
    from ..report.inputs import Inputs

    campaign = args.campaign
    store = results.CampaignStore(paths.results_root(), campaign)
    if campaign != "adhoc" and not store.dir.is_dir():
        parser.error(f"argument --campaign: no results for campaign {args.campaign!r} at {store.dir}")
    if args.ppn > args.max_procs:
        parser.error(f"argument --ppn: expected at most --max-procs {args.max_procs}, got {args.ppn}")
    if args.params:
        try:
            projection.load_params(args.params)
        except ValueError as exc:
            parser.error(f"argument --params: {exc}")
    try:
        out = projection.project(Inputs.load(store.dir, store.dir / "tables",
                                             paths.figures_root() / campaign),
                                 params_file=args.params, max_procs=args.max_procs, ppn=args.ppn)
    except ValueError as exc:
        parser.error(str(exc))
    pp = out["params"]
    print(f"Model projection to P={args.max_procs} (models only, no contention), campaign {campaign}")
    print(f"  Hockney parameters:  {pp.hockney_source}")
    print(f"  max-rate parameters: {pp.maxrate_source}")
    region = out["suara_region"]
    print("  measured SUARA cells: " + (f"P {region.p_min}..{region.p_max}, size "
          f"{format_size(region.s_min)}..{format_size(region.s_max)} ({region.cells} cells)"
          if region else "none"))
    for ppn, r in sorted(out["node_aware_regions"].items()):
        print(f"  measured RD/SMP/NAP cells at ppn {ppn}: P {r.p_min}..{r.p_max}, size "
              f"{format_size(r.s_min)}..{format_size(r.s_max)} ({r.cells} cells)")
    print()
    print(tables.plain_markdown(projection.HEADER, projection.table_rows(out["table"])))
    for m, f in out["fits"].items():
        print(f"  {format_size(m)}: best grid speedup ~ P^{f['exponent_best_single']:.2f} over the "
              f"best single, ~ P^{f['exponent_rs']:.2f} over rs (fit over P >= {projection.FIT_FROM})")
    for path in out["written"]:
        print(f"wrote {path}")
    return 0


def _family_library(text: str) -> str:
    """A library of a known family, measured (``openmpi``) or simulated (``openmpi@shaheen``)."""
    family, platform = split_name(text)
    if family not in FAMILIES or platform == "":
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(FAMILIES)} or "
                                         f"<family>@<platform>, got {text!r}")
    return text


def cmd_fit(args, parser) -> int:
    """Fit the Table 1 models (native allreduce cells) and the ping-pong and max-rate
    parameters (pingpong, reduce_local cells) to a campaign's summary; write them as one JSON
    file (harness/analysis/netparams.py)."""

    store = results.CampaignStore(paths.results_root(), args.campaign)
    if not store.summary.is_file():
        parser.error(f"argument campaign: no summary at {store.summary}; run the campaign first")
    try:
        doc = netparams.fit_file(store.summary, campaign=args.campaign, library=args.library,
                                 source=args.source, gamma=args.gamma)
    except ValueError as exc:
        print(f"harness fit: error: {exc}", file=sys.stderr)
        return 1
    params = models.Params.from_dict(doc)
    out = Path(args.output) if args.output else store.dir / "model_params.json"
    fileio.write_json(out, doc)
    fits = params.provenance.get("fits", {})
    g_from = params.provenance.get("gamma_from", {})
    print(f"fitted from {store.summary}; gamma = {params.gamma:.3g} s/B "
          f"({g_from.get('from', g_from) if isinstance(g_from, dict) else g_from})")
    if not fits:
        print(f"  Table 1 (alpha, beta) of every algorithm: {params.provenance.get('assumed')}")
    for lib, f in doc.get("pingpong", {}).items():
        print(f"  ping-pong {lib:8} level {f['level']:7} alpha {format_time(f['alpha']):>9}  "
              f"beta {f['beta']:.3g} s/B ({1 / f['beta'] / 1e9 if f['beta'] > 0 else float('inf'):.3g} GB/s)  "
              f"R^2 {f['r2']:.4f}  n {f['n']}  sizes {format_size(f['sizes'][0])}..{format_size(f['sizes'][1])}")
    if "maxrate_error" in params.provenance:
        print(f"  no max-rate parameters: {params.provenance['maxrate_error']}")
    if "maxrate" in doc:
        mr = doc["maxrate"]
        print(f"  max-rate ({mr['provenance']['library']}): alpha_l {format_time(mr['alpha_l'])}, "
              f"beta_l {mr['beta_l']:.3g} s/B, alpha {format_time(mr['alpha'])}, "
              f"R_b {mr['R_b'] / 1e9:.3g} GB/s, R_N {mr['R_N'] / 1e9:.3g} GB/s, gamma {mr['gamma']:.3g} s/B")
        for role, why in mr["provenance"].get("fallbacks", {}).items():
            print(f"    {role}: {why}")
    if fits:
        print(f"  Table 1 fit of {args.library}'s {args.source} algorithms:")
    print(f"  {'model':6} {'alpha':>10} {'beta [s/B]':>11} {'1/beta':>11} {'R^2':>6} {'cells':>5}")
    for name in models.ALL6:
        f = fits.get(name)
        if f is None:
            continue
        if "error" in f:
            print(f"  {name:6} not fitted: {f['error']}")
            continue
        bw = f"{1 / f['beta'] / 2**30:.2f}GiB/s" if f["beta"] > 0 else "-"
        print(f"  {name:6} {format_time(f['alpha']):>10} {f['beta']:>11.3g} {bw:>11} {f['r2']:>6.3f} {f['n']:>5}")
    print(f"wrote {out}")
    return 0
