"""What the library ran: one launch in which rank 0 runs under gdb with a breakpoint on each
collective function of its libmpi (``functions.py``), and each rank makes one
``MPI_Allreduce`` per size, preceded by ``MPI_Pcontrol`` as a marker. The functions hit
between two markers are what that size's call ran; they are mapped to the catalogue's names
with each entry's ``runs`` (the functions a forced entry runs; a composition lists its parts).

``python -m harness.measure.whatran SPEC`` is the ranks' program; ``whatran(lib, ...)``
launches it and returns, per size, the functions and the names. Where the library's file
yields no function (stripped, no ``__func__`` strings) or gdb is missing, each size says
``unverifiable`` and why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import paths
from ..libraries import Library
from ..turns import launch_turn
from . import functions

# the collective functions looked for, per family (their names as the libraries spell them)
PATTERNS = {
    "mpich": r"(MPIR|MPII|MPIDI|MPIDI_POSIX)_(Allreduce|Reduce|Bcast|Allgather|Reduce_scatter)"
             r"_(intra|allcomm)_\w+|MPIDI_POSIX_mpi_(allreduce|reduce|bcast)_\w+",
    "openmpi": r"ompi_coll_base_(allreduce|reduce|bcast|allgather|reduce_scatter)_intra_\w+"
               r"|mca_coll_(han|sm|basic|adapt|xhc|acoll)_allreduce\w*",
    "impi": r"(MPIR|MPII)_(Allreduce|Reduce|Bcast|Allgather|Reduce_scatter)_intra_\w+"
            r"|MPIDI_SHMGR_\w+|MPIDI_POSIX_mpi_(allreduce|reduce|bcast)\w*",
}
TIMEOUT = 300.0
GDB_SCRIPT = r'''
import gdb, json, os
FUNCS = json.loads(%(funcs)r)
LIBMPI = %(libmpi)r
OUT = %(out)r
state = {"marks": 0, "hits": [], "armed": False}

def base():
    pid = gdb.selected_inferior().pid
    with open("/proc/%%d/maps" %% pid) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 6 and os.path.realpath(parts[5]) == LIBMPI and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    return None

class Hit(gdb.Breakpoint):
    def __init__(self, spec, name):
        super().__init__(spec, internal=True)
        self.name = name
    def stop(self):
        if state["marks"]:
            state["hits"].append([state["marks"], self.name])
        return False

class Mark(gdb.Breakpoint):
    def stop(self):
        if not state["armed"]:
            state["armed"] = True
            b = base()
            state["base"] = b
            if b is not None:
                for name, addr in FUNCS.items():
                    Hit("*0x%%x" %% (b + addr), name)
        state["marks"] += 1
        return False

def done(event):
    with open(OUT, "w") as fh:
        json.dump(state, fh)

gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set breakpoint pending on")
gdb.execute("handle SIGUSR1 SIGUSR2 SIGPIPE SIGCHLD SIGSEGV SIGBUS nostop noprint pass")
gdb.events.exited.connect(done)
Mark("MPI_Pcontrol")
gdb.execute("run")
'''
WRAPPER = """#!/usr/bin/env bash
rank=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-0}}}}
if [ "$rank" = 0 ]; then exec %(gdb)s -q -batch -nx -x %(script)s --args "$@" > %(log)s 2>&1; fi
exec "$@"
"""


def names_of(lib: Library, hit: list[str]) -> list[str]:
    """The catalogue entries whose ``runs`` patterns all match functions in ``hit``, the most
    specific first (most parts); an entry contained in a longer one is dropped."""
    matched = []
    for name, alg in lib.algorithms.items():
        parts = alg.runs
        if parts and all(any(re.fullmatch(p, f) for f in hit) for p in parts):
            matched.append((len(parts), name))
    matched.sort(key=lambda t: (-t[0], list(lib.algorithms).index(t[1])))
    return [n for _, n in matched]


def whatran(lib: Library, env: dict, procs: int, sizes: list[int], dtype: str = "float64",
            algorithm: str = "native:auto", op: str = "sum", nodes: int = 1) -> list[dict]:
    """Per size: ``{"size", "functions": [[name, hits], ...], "ran": [catalogue names],
    "status": "identified" | "unidentified" | "unverifiable", "why"}``. ``env`` is the
    installation's environment (``preflight.environment``)."""
    libmpi = _loaded_libmpi(lib, env)
    gdb = shutil.which("gdb", path=env.get("PATH", "")) or shutil.which("gdb")
    if gdb is None:
        return [_unverifiable(s, "gdb is not installed (Debian: apt-get install gdb)") for s in sizes]
    table = functions.table(libmpi, PATTERNS[lib.family])
    if not table["functions"]:
        return [_unverifiable(s, f"no collective function found in {libmpi} (stripped, no "
                                 f"__func__ strings, no counters)") for s in sizes]
    with tempfile.TemporaryDirectory(prefix="whatran-", dir=paths.mpi_root()) as tmp:
        tmp = Path(tmp)
        out, log = tmp / "hits.json", tmp / "gdb.log"
        script = tmp / "bp.py"
        script.write_text(GDB_SCRIPT % {"funcs": json.dumps(table["functions"]),
                                        "libmpi": os.path.realpath(libmpi), "out": str(out)})
        wrapper = tmp / "wrap.sh"
        wrapper.write_text(WRAPPER % {"gdb": gdb, "script": script, "log": log})
        wrapper.chmod(0o755)
        spec = tmp / "spec.json"
        spec.write_text(json.dumps({"sizes": sizes, "dtype": dtype, "op": op}))
        run_env = {**env, **lib.run_env(algorithm)}
        argv = lib.launch_argv(procs, nodes) + [str(wrapper), sys.executable, "-m", __name__,
                                                str(spec)]
        with launch_turn(f"whatran {lib.name} P={procs}"):
            proc = subprocess.run(argv, env=run_env, capture_output=True, text=True,
                                  timeout=TIMEOUT, cwd=paths.REPO_ROOT, stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or not out.is_file():
            text = (log.read_text() if log.is_file() else "") + proc.stdout + proc.stderr
            raise RuntimeError(f"whatran launch failed (exit {proc.returncode}): {text[-1500:]}")
        state = json.loads(out.read_text())
    if state.get("base") is None:
        return [_unverifiable(s, f"{libmpi} not found among the process's mappings") for s in sizes]
    results = []
    for k, size in enumerate(sizes, start=1):
        hits: dict[str, int] = {}
        for mark, name in state["hits"]:
            if mark == 2 * k - 1:  # between the size's opening and closing markers
                hits[name] = hits.get(name, 0) + 1
        ran = names_of(lib, list(hits))
        results.append({"size": size, "functions": [[n, c] for n, c in hits.items()], "ran": ran,
                        "status": "identified" if ran else "unidentified",
                        "why": "" if ran else "no catalogue entry's functions all ran",
                        "how": table["how"]})
    return results


def _unverifiable(size: int, why: str) -> dict:
    return {"size": size, "functions": [], "ran": [], "status": "unverifiable", "why": why}


def _loaded_libmpi(lib: Library, env: dict) -> str:
    """The file the installation's processes load as libmpi: its ``libmpi``, else what the
    pre-flight's probe found."""
    path = lib.libmpi_path()
    if path:
        return os.path.realpath(path)
    out = subprocess.run([sys.executable, "-m", "harness.measure.identity"], env=env,
                         capture_output=True, text=True, timeout=120, cwd=paths.REPO_ROOT)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("harness-identity "))
    return os.path.realpath(json.loads(line.split(" ", 1)[1])["libmpi"])


def main(spec_path: str) -> int:
    import numpy as np
    from mpi4py import MPI

    spec = json.loads(Path(spec_path).read_text())
    comm = MPI.COMM_WORLD
    dtype = np.dtype(spec["dtype"])
    op = spec.get("op", "sum")
    want = comm.Get_size() if op == "sum" else 1  # ones: prod, max and min give 1
    for size in spec["sizes"]:
        n = size // dtype.itemsize
        send = np.ones(n, dtype=dtype)
        recv = np.empty(n, dtype=dtype)
        comm.Barrier()
        MPI.Pcontrol(1)  # markers around the call: odd ones open a size, even ones close it
        comm.Allreduce(send, recv, op=getattr(MPI, op.upper()))
        MPI.Pcontrol(1)
        if n and recv[0] != want:
            raise RuntimeError(f"whatran: wrong result {recv[0]} at {size} B")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
