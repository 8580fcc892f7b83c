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
from ..measure import preflight


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
    for name, site, launch in installations(args, parser):
        try:
            lib = plan.installation(name, site, launch)
        except (KeyError, ValueError) as exc:
            print(f"{name}: {exc.args[0]}")
            code = 2
            continue
        source = lib.wheel if not lib.declared else (lib.version or "site")
        read = "as read from the library" if lib.available is not None else (
            "the catalogue (wheel verified)" if not lib.declared
            else "the catalogue (the library does not say)")
        print(f"{lib.name} ({lib.title}, {source}; family {lib.family}; {read})")
        for alg in lib.algorithms.values():
            if not lib.has(alg.name):
                continue
            forced = " ".join(f"{k}={v}" for k, v in alg.env.items()) or "(nothing forced)"
            print(f"  native:{alg.name:<28} {forced}")
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
