"""An installation checked before anything is measured with it: its ``setup`` lines run, its
launcher found, its libmpi loaded through mpi4py, its family read from the library's own
version string, what it can force read from the library (``harness.measure.identity``), and a
P = 2 launch through its launcher. Any fault is one ``InstallationError`` line naming the
installation, the key, the value and what was found; nothing is launched after it.

``discover`` is the part without the launcher (one process, ``MPI_Init`` as a singleton): what
``harness plan`` and the workflow's parse need to refuse ``native:X`` the library lacks.
``preflight`` adds the launch. A result is kept under ``.mpi/identities/`` when it can be
fingerprinted (no setup lines, libmpi and launcher files whose size and time are part of the
key) and reused while those files are unchanged; an installation with setup lines (modules)
is read again every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .. import fileio, paths
from ..errors import ConfigError
from ..libraries import Library, restrict
from ..turns import launch_turn

PROBE = "harness.measure.identity"
MARK = "harness-identity "
TIMEOUT = 120.0
_DECISIVE = re.compile(r"(cannot load MPI library|cannot open shared object|error while loading|"
                       r"No such file|not found|command not found|\w+Error: |\w+Exception: |"
                       r"ERROR|[Ee]rror:)")


_SEEN: dict[str, dict] = {}


class InstallationError(ConfigError):
    """An installation that is not what it was declared, or cannot start (one line)."""


def decisive(text: str, limit: int = 300) -> str:
    """The line of a failed command's output that says why: the last one that names an error
    (a traceback's exception, a loader's message), else the last non-empty line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    hits = [ln for ln in lines if _DECISIVE.search(ln)]
    line = (hits or lines or ["(no output)"])[-1]
    return line if len(line) <= limit else line[:limit] + "..."


def _setup_env(lib: Library) -> dict:
    """The environment after the installation's ``setup`` lines ran in bash (``set -e``): the
    lines may load modules that change PATH and LD_LIBRARY_PATH. InstallationError naming
    the line that failed."""
    if not lib.setup:
        return dict(os.environ)
    body = ["set -e", "trap 'echo \"harness-setup-failed $_harness_line\" >&2' ERR"]
    for i, line in enumerate(lib.setup):
        body += [f"_harness_line={i}", line]
    body.append(f"{shlex.quote(sys.executable)} -c 'import json, os; "
                f"print(\"harness-env \" + json.dumps(dict(os.environ)))'")
    try:
        out = subprocess.run(["bash", "-c", "\n".join(body)], capture_output=True, text=True,
                             timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InstallationError(f"libraries.{lib.name}.setup: the lines did not end within "
                                f"{TIMEOUT:.0f} s") from None
    env_line = next((ln for ln in out.stdout.splitlines() if ln.startswith("harness-env ")), None)
    if out.returncode != 0 or env_line is None:
        failed = re.findall(r"harness-setup-failed (\d+)", out.stderr)
        i = int(failed[-1]) if failed else len(lib.setup) - 1
        err = "\n".join(ln for ln in out.stderr.splitlines() if "harness-setup-failed" not in ln)
        raise InstallationError(
            f"libraries.{lib.name}.setup[{i}]: {lib.setup[i]!r} failed (exit {out.returncode}): "
            f"{decisive(err)}")
    return json.loads(env_line[len("harness-env "):])


def environment(lib: Library) -> dict:
    """The environment a launch of ``lib`` runs in: after its setup lines, with its variables
    and search paths, as its job script makes it."""
    env = _setup_env(lib)
    env.update(lib.run_env())
    for var, dirs in lib.prepend().items():
        env[var] = ":".join(dirs + ([env[var]] if env.get(var) else []))
    return env


def _launcher(lib: Library, env: dict) -> str:
    tok = lib.launch_argv(2)[0]
    found = tok if "/" in tok and os.access(tok, os.X_OK) else (
        None if "/" in tok else shutil.which(tok, path=env.get("PATH", "")))
    if not found:
        where = "no such executable file" if "/" in tok else "not on PATH after the setup lines"
        raise InstallationError(f"libraries.{lib.name}.launcher[0]: {tok!r}: {where}")
    return found


def _libmpi(lib: Library) -> str | None:
    path = lib.libmpi_path()
    if path and not Path(path).exists():
        raise InstallationError(f"libraries.{lib.name}.libmpi: {lib.libmpi!r}: no such file")
    return path


def _probe(lib: Library, argv: list[str], env: dict, what: str) -> dict:
    try:
        out = subprocess.run(argv + [sys.executable, "-m", PROBE], env=env, capture_output=True,
                             text=True, timeout=TIMEOUT, cwd=paths.REPO_ROOT,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InstallationError(f"libraries.{lib.name}: {what} did not end within "
                                f"{TIMEOUT:.0f} s") from None
    except OSError as exc:
        raise InstallationError(f"libraries.{lib.name}: {what}: {exc}") from None
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith(MARK)), None)
    if out.returncode != 0 or line is None:
        key = "launcher" if argv else ("libmpi" if lib.libmpi else "setup")
        raise InstallationError(f"libraries.{lib.name}.{key}: {what} failed (exit "
                                f"{out.returncode}): {decisive(out.stdout + out.stderr)}")
    return json.loads(line[len(MARK):])


def _check_family(lib: Library, ident: dict) -> None:
    if ident.get("family") != lib.family:
        raise InstallationError(
            f"libraries.{lib.name}.family: declared {lib.family!r}, but the library loaded "
            f"({ident.get('libmpi')}) is {ident.get('version')!r}, of family "
            f"{ident.get('family') or 'unknown'}")


def _fingerprint(lib: Library, launched: bool) -> str | None:
    """A key for the installation's files, or None when they cannot be fingerprinted."""
    if lib.setup:
        return None
    argv = lib.launch_argv(2, 1)
    files = [lib.libmpi_path(), argv[0] if launched else None,
             str(Path(__file__).with_name("identity.py"))]
    facts = [lib.name, lib.family, argv, lib.libmpi, sorted(lib.run_env().items()),
             sys.executable, launched]
    for f in files:
        if f is None:
            continue
        try:
            st = os.stat(f)
        except OSError:
            return None
        facts.append([f, st.st_size, st.st_mtime_ns])
    return hashlib.sha1(json.dumps(facts, default=str).encode()).hexdigest()[:16]


def _cached(key: str | None):
    if key is None:
        return None
    path = paths.mpi_root() / "identities" / f"{key}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _keep(key: str | None, ident: dict) -> None:
    if key is not None:
        fileio.write_json(paths.mpi_root() / "identities" / f"{key}.json", ident)


def discover(lib: Library) -> dict:
    """The identity of ``lib`` read in one process (no launcher): version, libmpi, family,
    what it can force. InstallationError on any fault, the family checked."""
    seen = json.dumps([lib.name, lib.family, lib.setup, lib.launcher, lib.libmpi,
                       sorted(lib.env.items())])
    if seen in _SEEN:  # read once per process: the plan asks for it per experiment and run
        return _SEEN[seen]
    key = _fingerprint(lib, launched=False)
    ident = _cached(key)
    if ident is None:
        env = environment(lib)
        _libmpi(lib)
        ident = _probe(lib, [], env, "loading the library (MPI_Init in one process)")
        _check_family(lib, ident)
        _keep(key, ident)
    _SEEN[seen] = ident
    return ident


def preflight(lib: Library) -> dict:
    """``discover`` and a P = 2 launch through the installation's launcher, which must start
    two processes of the same library. Returns the identity with ``launched: true``."""
    key = _fingerprint(lib, launched=True)
    ident = _cached(key)
    if ident is not None:
        return ident
    env = environment(lib)
    _launcher(lib, env)
    _libmpi(lib)
    ident = _probe(lib, [], env, "loading the library (MPI_Init in one process)")
    _check_family(lib, ident)
    with launch_turn(f"pre-flight of {lib.name}"):
        two = _probe(lib, lib.launch_argv(2, 1), env,
                     f"a P=2 launch ({' '.join(lib.launch_argv(2, 1))})")
    if two.get("ranks") != 2 or two.get("version") != ident.get("version"):
        raise InstallationError(
            f"libraries.{lib.name}.launcher: {' '.join(lib.launch_argv(2, 1))} started "
            f"{two.get('ranks')} process(es) of {two.get('version')!r} where 2 of "
            f"{ident.get('version')!r} were asked")
    ident = {**ident, "launched": True, "launcher_path": _launcher(lib, env)}
    _keep(key, ident)
    return ident


def identified(lib: Library, launch: bool = False) -> Library:
    """``lib`` restricted to what its library was found to have (``restrict``)."""
    return restrict(lib, preflight(lib) if launch else discover(lib))
