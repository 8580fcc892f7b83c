"""The MPI libraries installed here: ``harness algorithms`` lists what each can force,
``harness install`` installs their wheels under .mpi/, ``harness doctor`` checks that each
launcher starts."""

from __future__ import annotations

import os
import subprocess
import sys

from .. import libraries
from ..algorithms import harness_names
from ..turns import launch_turn


def register(sub) -> None:
    """Add ``algorithms``, ``install`` and ``doctor`` to the subparsers ``sub``."""
    p = sub.add_parser("algorithms", help="list every library's forcible algorithms")
    p.set_defaults(func=cmd_algorithms)
    p = sub.add_parser("install", help="install the MPI libraries' wheels under .mpi/ (idempotent)")
    p.set_defaults(func=cmd_install)
    p = sub.add_parser("doctor", help="each library's version string and whether its launcher starts")
    p.set_defaults(func=cmd_doctor)


def cmd_algorithms(args, parser) -> int:
    for lib in libraries.catalogue().values():
        print(f"{lib.name} ({lib.title}, {lib.wheel})")
        for alg in lib.algorithms.values():
            forced = " ".join(f"{k}={v}" for k, v in alg.env.items()) or "(nothing forced)"
            print(f"  native:{alg.name:<28} {forced}")
    names = harness_names()
    print("harness algorithms: " + (", ".join(names) if names else "none yet"))
    return 0


def cmd_install(args, parser) -> int:
    for lib in libraries.catalogue().values():
        if libraries.install(lib):
            print(f"installed {lib.wheel} into {lib.prefix}")
        else:
            print(f"{lib.wheel}: already installed in {lib.prefix}")
    return 0


def cmd_doctor(args, parser) -> int:
    code = 0
    # every rank joins one allreduce; rank 0 alone prints (the launchers merge the ranks'
    # output, and two ranks' lines can run together): "<ranks that took part> <version>"
    probe = ("from mpi4py import MPI; n = MPI.COMM_WORLD.allreduce(1); "
             "MPI.COMM_WORLD.Get_rank() or print(n, "
             "MPI.Get_library_version().strip().splitlines()[0])")
    for lib in libraries.catalogue().values():
        if not lib.installed():
            print(f"{lib.name:8} NOT INSTALLED (run `make setup`)")
            code = 1
            continue
        env = {**os.environ, **lib.run_env()}
        for var, dirs in lib.prepend().items():
            env[var] = ":".join(dirs + ([env[var]] if env.get(var) else []))
        argv = lib.launch_argv(2) + [sys.executable, "-c", probe]
        try:
            with launch_turn(f"harness doctor: {lib.name}"):
                out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
            ranks, _, version = out.stdout.strip().partition(" ")
            ok = out.returncode == 0 and ranks == "2"
            version = version if ok else (out.stdout + out.stderr).strip()[-200:]
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, version = False, str(exc)
        print(f"{lib.name:8} launcher {'starts' if ok else 'FAILED'}: {version}")
        code = code or (0 if ok else 1)
    return code
