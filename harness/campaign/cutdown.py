"""A campaign config cut down to a smoke test that keeps every experiment.

The paper-scale configs (`config/paper-*.yaml`, docs/paper_configs.md) ask for up to 48 nodes,
sizes up to 1 GiB and delays up to a second. ``cut_down`` turns such a config into a tiny one
that still exercises every experiment (same libraries, algorithms, delay modes, parameters),
so a site can check the whole path on two nodes in minutes before spending node-hours:

* P: the experiment's smallest P values that fit ``max_procs`` (at most ``max_p`` of them) and
  the constraints below; if none fits, one P with the experiment's ranks per node on the
  reduced node count (one rank per node stays one rank per node);
* nodes: at most ``max_nodes``, never more than P, dividing every kept P when above 1;
* parameters: ``pairs`` (ping-pong) at most P/2; explicit grids (``grid: 4x3``) only those
  whose product is the kept P, or that P's factorisations with as many dimensions when none
  fits (one P then, the largest allowed); ``ppn`` values dividing every kept P, else 2 (P kept even);
  ``compute`` replaced by ``compute`` given here; any other swept parameter (a list, e.g.
  SUARA2's ``row`` and ``col``) cut to its first ``max_sweep`` values (default one: further
  values take the same code path, and on Open MPI each forced row or column algorithm is a
  launch of its own);
* algorithms: a glob over native algorithms (``native:*``) becomes AUTO and ``max_native``
  forced algorithms all the experiment's libraries have (the ring first): each forced
  algorithm is a launch of its own;
* sizes: the ``max_sizes`` smallest; for ``pingpong`` two at least, the last of them the
  largest up to 1 MiB (the alpha-beta fit needs sizes far apart); max delays: the
  ``max_delays`` smallest above 0;
  ``late_rank`` below P;
* workloads: one model (the smallest present), one fusion policy, one precision;
* ``sgd:`` entries: P and nodes capped, ``executions: 1``, ``iterations`` and ``test_images``
  small;
* the confirmation and tuning stages off, site ``libraries`` entries dropped (the local
  wheels are used), ``stopping`` replaced by the fast rule given, ``run_walltime`` short.

``python -m harness.campaign.cutdown config/paper-pap.yaml > /tmp/tiny.yaml`` prints the cut-down YAML
(``--campaign`` names it; default ``<campaign>-tiny``).
"""

from __future__ import annotations

import argparse
import sys
from itertools import product
from math import prod

import yaml

from ..libraries import get_library
from ..units import parse_size, parse_time

PINGPONG_FIT_SIZE = 1 << 20  # the largest ping-pong size a cut-down keeps (1 MiB)
FAST_STOP = {"min_reps": 3, "max_reps": 6, "precision": 0.5, "warmup": 1, "time_budget": "20s"}
# the model whose trace is cheapest to replay first
WORKLOAD_ORDER = ("resnet110", "alexnet", "resnet50", "vgg11")


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _grid_dims(value) -> list[int] | None:
    """``"4x3"`` -> [4, 3]; None for ``auto``, ``best-grid`` and anything not a grid."""
    parts = str(value).lower().split("x")
    if len(parts) < 2 or not all(p.strip().isdigit() for p in parts):
        return None
    return [int(p) for p in parts]


def _factorisations(p: int, dims: int, limit: int = 3) -> list[str]:
    """Up to ``limit`` grids of ``dims`` dimensions whose product is ``p``, balanced first."""
    divisors = [d for d in range(1, p + 1) if p % d == 0]
    grids = [g for g in product(divisors, repeat=dims) if prod(g) == p]
    grids.sort(key=lambda g: (max(g) - min(g), g))
    return ["x".join(map(str, g)) for g in grids[:limit]]


def _cut_algorithms(patterns, libraries, max_native: int) -> list[str]:
    """A glob over native algorithms (``native:*``) as AUTO plus up to ``max_native`` forced
    algorithms that every library of the experiment has (the ring first): each forced
    algorithm is one more launch per library and P. Names and other globs are kept."""
    from fnmatch import fnmatchcase

    out: list[str] = []
    for pat in patterns:
        if not (str(pat).startswith("native:") and any(ch in str(pat) for ch in "*?[")):
            out.append(pat)
            continue
        libs = [get_library(name) for name in libraries]
        common = [n for n in libs[0].native_names()
                  if fnmatchcase(n, pat) and all(n in lib.native_names() for lib in libs[1:])]
        forced = sorted((n for n in common if n != "native:auto"),
                        key=lambda n: (n != "native:ring", common.index(n)))[:max_native]
        picked = (["native:auto"] if "native:auto" in common else []) + forced
        out.extend(n for n in (picked or [pat]) if n not in out)
    return out


def _cut_experiment(ex: dict, *, max_procs: int, max_nodes: int, max_p: int, max_sizes: int,
                    max_delays: int, compute: str, max_native: int, max_sweep: int) -> dict:
    ex = dict(ex)
    params = dict(ex.get("params") or {})
    nodes_orig = int(ex.get("nodes", 1))
    nodes = min(nodes_orig, max_nodes)
    procs = sorted({int(p) for p in ex["procs"]})

    if "pairs" in params:  # ping-pong: 2 x pairs <= P
        pairs = sorted({int(v) for v in _as_list(params["pairs"])})
        fit = [v for v in pairs if 2 * v <= max_procs] or [max_procs // 2]
        params["pairs"] = fit if isinstance(params["pairs"], list) else fit[0]
    need_pairs = 2 * max(_as_list(params.get("pairs", 0)))
    ppn = [int(v) for v in _as_list(params["ppn"])] if "ppn" in params else []
    grids = [g for g in _as_list(params.get("grid", [])) if _grid_dims(g)]

    def fits(p: int) -> bool:
        return (p <= max_procs and p >= nodes and p >= need_pairs
                and (nodes == 1 or p % nodes == 0) and (not ppn or p % 2 == 0))

    kept = [p for p in procs if fits(p)][:max_p]
    if not kept:
        per_node = -(-procs[0] // nodes_orig)  # the experiment's ranks per node
        want = min(max_procs, per_node * nodes)
        kept = [next((p for p in range(want, max_procs + 1) if fits(p)),
                     max(p for p in range(1, max_procs + 1) if fits(p)))]
    if grids:  # a grid sweep arranges one P: the largest kept one some grid fits, else the
        # largest P that fits the limits (its factorisations replace the grids)
        fit_any = [p for p in kept if any(prod(_grid_dims(g)) == p for g in grids)]
        kept = [fit_any[-1] if fit_any else max(p for p in range(1, max_procs + 1) if fits(p))]
        p = kept[0]
        fitting = [g for g in grids if prod(_grid_dims(g)) == p]
        if not fitting:
            dims = sorted({len(_grid_dims(g)) for g in grids})
            fitting = [f for d in dims for f in _factorisations(p, d)]
        others = [g for g in _as_list(params["grid"]) if not _grid_dims(g)]
        value = others + fitting
        params["grid"] = value if isinstance(params["grid"], list) or len(value) > 1 else value[0]
    if ppn:
        ok = sorted({v for v in ppn if all(p % v == 0 for p in kept)}) or [2]
        params["ppn"] = ok if isinstance(params["ppn"], list) or len(ok) > 1 else ok[0]
    if "compute" in params:
        params["compute"] = compute
    for key, value in params.items():  # any other sweep: its first values
        if key not in ("grid", "ppn", "pairs") and isinstance(value, list):
            params[key] = value[:max_sweep]

    ex["procs"] = kept
    ex["nodes"] = nodes
    ex["algorithms"] = _cut_algorithms(ex["algorithms"], ex["libraries"], max_native)
    if params or "params" in ex:
        ex["params"] = params
    if "sizes" in ex:
        ordered = sorted(ex["sizes"], key=parse_size)
        if "pingpong" in ex["algorithms"] and len(ordered) > 1:
            # fitting alpha and beta needs two sizes far apart (between 4 B and 64 B the slope
            # is timing noise, often fitted as beta = 0): the smallest ones and the largest up
            # to PINGPONG_FIT_SIZE
            keep = max(max_sizes, 2)
            far = [s for s in ordered[keep - 1:] if parse_size(s) <= PINGPONG_FIT_SIZE]
            ex["sizes"] = ordered[:keep - 1] + [far[-1] if far else ordered[keep - 1]]
        else:
            ex["sizes"] = ordered[:max_sizes]
    if "max_delays" in ex:
        positive = sorted((d for d in ex["max_delays"] if parse_time(d) > 0), key=parse_time)
        ex["max_delays"] = positive[:max_delays] or [ex["max_delays"][0]]
    if "late_rank" in ex and int(ex["late_rank"]) >= min(kept):
        ex["late_rank"] = min(kept) - 1
    if "workload" in ex:
        w = dict(ex["workload"])
        models = list(w["models"])
        w["models"] = [min(models, key=lambda m: WORKLOAD_ORDER.index(m)
                           if m in WORKLOAD_ORDER else len(WORKLOAD_ORDER))]
        for key in ("fusion", "precision"):
            if key in w:
                w[key] = list(w[key])[:1]
        ex["workload"] = w
    ex.pop("oversubscribe", None)
    return ex


def _cut_sgd(entry: dict, *, max_procs: int, max_nodes: int) -> dict:
    entry = dict(entry)
    entry["procs"] = min(int(entry["procs"]), max_procs)
    entry["nodes"] = min(int(entry.get("nodes", 1)), max_nodes, entry["procs"])
    entry["executions"] = 1
    entry["iterations"] = min(int(entry.get("iterations", 390)), 5)
    entry["test_images"] = min(int(entry.get("test_images", 1000)), 64)
    if isinstance(entry.get("straggler_rank"), int) and entry["straggler_rank"] >= entry["procs"]:
        entry["straggler_rank"] = entry["procs"] - 1
    return entry


def cut_down(doc: dict, *, campaign: str | None = None, max_procs: int = 4, max_nodes: int = 2,
             max_p: int = 2, max_sizes: int = 2, max_delays: int = 1, compute: str = "5ms",
             max_native: int = 1, max_sweep: int = 1,
             stopping: dict | None = None, run_walltime: str = "5min",
             libraries: dict | None = None) -> dict:
    """The config mapping ``doc`` (as loaded from YAML) cut down as the module says; every
    experiment and every ``sgd:`` entry is kept (with its ``enabled`` flag). ``libraries``:
    the site entries of the cut-down config (default none: the local wheels)."""
    out = {k: v for k, v in doc.items()
           if k not in ("experiments", "sgd", "libraries", "confirm", "tune", "stopping")}
    out["campaign"] = campaign or f"{doc['campaign']}-tiny"
    kept_stop = {k: v for k, v in (doc.get("stopping") or {}).items()
                 if k in ("confidence", "metric", "sync", "base_compute")}
    out["stopping"] = {**kept_stop, **(stopping or FAST_STOP)}
    out["confirm"] = {"enabled": False}
    out["tune"] = {"enabled": False}
    out["run_walltime"] = run_walltime
    if libraries:
        out["libraries"] = dict(libraries)
    out["experiments"] = {
        name: _cut_experiment(ex, max_procs=max_procs, max_nodes=max_nodes, max_p=max_p,
                              max_sizes=max_sizes, max_delays=max_delays, compute=compute,
                              max_native=max_native, max_sweep=max_sweep)
        for name, ex in doc["experiments"].items()}
    if doc.get("sgd"):
        out["sgd"] = {name: _cut_sgd(e, max_procs=max_procs, max_nodes=max_nodes)
                      for name, e in doc["sgd"].items()}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.campaign.cutdown", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("config", help="a campaign config (e.g. config/paper-pap.yaml)")
    ap.add_argument("--campaign", help="campaign name of the cut-down config (default "
                    "<campaign>-tiny)")
    ap.add_argument("--max-procs", type=int, default=4)
    ap.add_argument("--max-nodes", type=int, default=2)
    ap.add_argument("--max-sizes", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        with open(args.config) as fh:
            doc = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as exc:
        ap.error(f"argument config: {args.config}: {getattr(exc, 'strerror', None) or exc}")
    if not isinstance(doc, dict) or "experiments" not in doc or "campaign" not in doc:
        ap.error(f"argument config: {args.config}: expected a campaign config with campaign: "
                 f"and experiments:")
    for name, value in (("--max-procs", args.max_procs), ("--max-nodes", args.max_nodes),
                        ("--max-sizes", args.max_sizes)):
        if value < 1:
            ap.error(f"argument {name}: expected an integer >= 1, got {value}")
    yaml.safe_dump(cut_down(doc, campaign=args.campaign, max_procs=args.max_procs,
                            max_nodes=args.max_nodes, max_sizes=args.max_sizes),
                   sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
