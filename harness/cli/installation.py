"""The MPI library installations: ``harness algorithms`` lists what each can force,
``harness install`` installs the wheels under .mpi/, ``harness doctor`` checks each
installation as the pre-flight does, ``harness preflight`` is the workflow's pre-flight step.

Without ``--config`` these commands see the three wheels; with it, every installation the
config names (its ``libraries:`` declarations and the wheels its experiments use)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import fileio, libraries
from ..algorithms import harness_names
from ..campaign import config, plan
from ..measure import preflight, verification
from ..measure.whatran import whatran
from ..units import format_size, parse_size
from .args import int_at_least


def register(sub) -> None:
    """Add ``algorithms``, ``install``, ``doctor`` and ``preflight`` to the subparsers ``sub``."""
    p = sub.add_parser(
        "algorithms", help="list each installation's forcible algorithms",
        description="Every native algorithm each installation can force (the wheels', or with "
                    "--config those of the config's installations, as read from each library), "
                    "and the harness's own algorithms.")
    p.add_argument("--config", default=None, help="a campaign config: list its installations")
    p.add_argument("--library", action="append", default=None, metavar="NAME",
                   help="only this installation (repeatable)")
    p.set_defaults(func=cmd_algorithms)
    p.add_argument("--verify", action="store_true",
                   help="force each listed algorithm at P=2, 3, 4 under gdb (harness whatran) and "
                        "check that the functions it names ran; the result is kept with the "
                        "installation, and an algorithm that ran something else is refused for "
                        "measurement")
    p.add_argument("--algorithm", action="append", default=None, metavar="native:NAME",
                   help="with --verify: only this algorithm (repeatable)")
    p = sub.add_parser(
        "whatran", help="which internal allreduce function(s) one call ran, per size",
        description="Launch once, rank 0 under gdb with a breakpoint on each collective function "
                    "of the installation's libmpi, one MPI_Allreduce per size, and report per "
                    "size the library functions that call ran and the catalogue's name for them.")
    p.add_argument("--library", default="mpich", help="an installation (a wheel, or declared in --config)")
    p.add_argument("--config", default=None, help="a campaign config declaring --library")
    p.add_argument("--procs", "-n", type=int_at_least(1), default=4, help="number of processes P")
    p.add_argument("--sizes", default="8B,64KiB,1MiB",
                   help="comma-separated message sizes per rank, e.g. 8B,4KiB,16MiB")
    p.add_argument("--algorithm", default="native:auto",
                   help="native:<name>: force it (default native:auto, the library's choice)")
    p.add_argument("--dtype", choices=("float32", "float64", "int32", "int64"), default="float64")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_whatran)
    p = sub.add_parser("install", help="install the MPI libraries' wheels under .mpi/ (idempotent)")
    p.set_defaults(func=cmd_install)
    p = sub.add_parser(
        "doctor", help="check each installation: family, version, libmpi, launcher, what it forces",
        description="Run each installation's pre-flight (setup lines, launcher, libmpi loaded "
                    "through mpi4py, its family from the version string, a P=2 launch) and "
                    "print what was found. Exit 0 when every one passes, 2 otherwise.")
    p.add_argument("--config", default=None, help="a campaign config: check its installations")
    p.add_argument("--library", action="append", default=None, metavar="NAME",
                   help="only this installation (repeatable)")
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser("preflight", help="the workflow's pre-flight of one installation")
    p.add_argument("declaration", help="results/<campaign>/installations/<name>.decl.json")
    p.add_argument("output", help="where the identity goes when the check passes")
    p.set_defaults(func=cmd_preflight)


def installations(args, parser) -> list[tuple[str, dict | None, str]]:
    """(name, declaration or None for a wheel, launch) of what the command covers."""
    if args.config is None:
        found = [(n, None, "local") for n in libraries.FAMILIES]
    else:
        try:
            cfg = config.load(args.config)
        except (OSError, config.ConfigError) as exc:
            parser.exit(2, f"{parser.prog}: error: argument --config: {exc}\n")
        used = {lib for e in cfg.experiments for lib in e.libraries}
        used |= {e["library"] for e in (cfg.sgd or {}).values()}
        names = sorted(used | set(cfg.libraries), key=libraries.library_sort_key)
        found = [(n, cfg.libraries.get(n), cfg.launch) for n in names]
    if args.library:
        unknown = [n for n in args.library if n not in {f[0] for f in found}]
        if unknown:
            parser.exit(2, f"{parser.prog}: error: argument --library: {unknown[0]!r} is not an "
                           f"installation here; expected one of "
                           f"{', '.join(f[0] for f in found)}\n")
        found = [f for f in found if f[0] in args.library]
    return found


def _forcible(lib) -> str:
    names = [n[len("native:"):] for n in lib.native_names() if n != "native:auto"]
    return ", ".join(names) or "nothing"


def cmd_algorithms(args, parser) -> int:
    code = 0
    if args.algorithm and not args.verify:
        parser.error("argument --algorithm: only with --verify")
    for name, site, launch in installations(args, parser):
        try:
            if args.verify:
                _verify(plan.installation(name, site, launch, refuse=False), args, parser)
            lib = plan.installation(name, site, launch)
        except (KeyError, ValueError) as exc:
            print(f"{name}: {exc.args[0]}")
            code = 2
            continue
        checked = verification.recorded(lib, current=True)
        source = lib.wheel if not lib.declared else (lib.version or "site")
        read = "as read from the library" if lib.available is not None else (
            "the catalogue (wheel verified)" if not lib.declared
            else "the catalogue (the library does not say)")
        print(f"{lib.name} ({libraries.catalogue()[lib.family].title}, {source}; family {lib.family}; {read})")
        for alg in lib.algorithms.values():
            if not lib.has(alg.name):
                continue
            forced = " ".join(f"{k}={v}" for k, v in alg.env.items()) or "(nothing forced)"
            said = checked.get(alg.name)
            print(f"  native:{alg.name:<28} {forced}"
                  + (f"  [{verification.describe(said)}]" if said else ""))
        lacks = [n for n in lib.algorithms if not lib.has(n)]
        if lacks:
            print(f"  lacks (in the {lib.family} catalogue, not in this library): {', '.join(lacks)}")
        if lib.ignored:
            print(f"  forcing variables it does not know (left out): {', '.join(lib.ignored)}")
    names = harness_names()
    print("harness algorithms: " + (", ".join(names) if names else "none yet"))
    return code


def cmd_install(args, parser) -> int:
    for lib in libraries.catalogue().values():
        if libraries.install(lib):
            print(f"installed {lib.wheel} into {lib.prefix}")
        else:
            print(f"{lib.wheel}: already installed in {lib.prefix}")
    return 0


def cmd_doctor(args, parser) -> int:
    code = 0
    for name, site, launch in installations(args, parser):
        try:
            lib = libraries.get_library(name, site)
            if not lib.installed():
                raise preflight.InstallationError(
                    f"libraries.{name}: the wheel is not installed under {lib.prefix} (run "
                    f"`make setup`)")
            lib = plan.installation(name, site, launch)
            ident = preflight.preflight(lib)
            lib = libraries.restrict(lib, ident)
        except (KeyError, ValueError) as exc:
            print(f"{name:8} FAILED: {exc.args[0]}")
            code = 2
            continue
        print(f"{name:8} passed: {ident['version']}")
        print(f"{'':8}   family {lib.family}; libmpi {ident['libmpi']}; mpi4py ABI "
              f"{ident.get('mpi4py_abi') or '?'}")
        print(f"{'':8}   launcher {' '.join(lib.launch_argv(2))} ({ident.get('launcher_path')}): "
              f"started 2 of 2 processes")
        print(f"{'':8}   forces: {_forcible(lib)} ({ident.get('how', '')})")
    return code


def cmd_preflight(args, parser) -> int:
    decl = fileio.read_json(args.declaration)
    try:
        lib = plan.installation(decl["name"], decl.get("site"), decl.get("launch", "local"))
        if not lib.installed():
            raise preflight.InstallationError(
                f"libraries.{lib.name}: the wheel is not installed under {lib.prefix} (run "
                f"`make setup`)")
        ident = preflight.preflight(lib)
    except (KeyError, ValueError) as exc:
        print(f"pre-flight of {decl['name']} in campaign {decl.get('campaign')}: {exc.args[0]}",
              file=sys.stderr)
        return 2
    fileio.write_json(Path(args.output), {**ident, "declaration": decl})
    print(f"pre-flight of {decl['name']}: {ident['version']} "
          f"({json.dumps(ident.get('algorithms'))})")
    return 0


def _verify(lib, args, parser) -> None:
    names = [a.split(":", 1)[-1] for a in args.algorithm or []]
    for n in names:
        if n not in lib.algorithms or not lib.has(n):
            parser.error(f"argument --algorithm: {n!r} is not an algorithm of {lib.name}; "
                         f"expected one of {', '.join(lib.native_names())}")
    env = preflight.environment(lib)
    for name, result in verification.verify(lib, env, names or None):
        print(f"verify {lib.name} native:{name}: {verification.describe(result)}", flush=True)


def cmd_whatran(args, parser) -> int:
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError as exc:
        parser.error(f"argument --sizes: {exc}")
    site, launch = None, "local"
    if args.config:
        try:
            cfg = config.load(args.config)
        except (OSError, config.ConfigError) as exc:
            parser.exit(2, f"{parser.prog}: error: argument --config: {exc}\n")
        site, launch = cfg.libraries.get(args.library), cfg.launch
    try:
        lib = plan.installation(args.library, site, launch)
        lib = libraries.restrict(lib, preflight.preflight(lib))
        if args.algorithm.startswith("native:"):
            lib.native(args.algorithm)
        else:
            parser.error(f"argument --algorithm: expected native:<name>, got {args.algorithm!r}")
        env = preflight.environment(lib)
    except (KeyError, ValueError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc.args[0]}\n")
    itemsize = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}[args.dtype]
    bad = [s for s in sizes if s % itemsize]
    if bad:
        parser.error(f"argument --sizes: {bad[0]} B is not a whole number of {args.dtype} elements")
    found = whatran(lib, env, args.procs, sizes, args.dtype, args.algorithm)
    if args.json:
        print(json.dumps({"library": lib.name, "version": lib.version, "procs": args.procs,
                          "algorithm": args.algorithm, "sizes": found}, indent=1))
        return 0
    print(f"{lib.name} ({lib.version}), P={args.procs}, {args.algorithm}, {args.dtype} sum:")
    for r in found:
        funcs = ", ".join(f"{n}" + (f" x{c}" if c > 1 else "") for n, c in r["functions"])
        what = " + ".join(r["ran"][:1]) if r["ran"] else r["status"]
        print(f"  {format_size(r['size']):>8}: {what:<28} ({funcs or r['why']})")
    return 0
