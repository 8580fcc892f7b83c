"""SimGrid's Python module, found without putting a foreign ``site-packages`` on ``sys.path``.

Where it is looked for, in order:

1. ``HARNESS_SIMGRID_MODULE``: the path of the extension module (``simgrid.cpython-*.so``);
2. an importable ``simgrid`` (SimGrid installed into this environment: conda-forge, or a
   build from source);
3. Debian's ``python3-simgrid``: ``/usr/lib/python3/dist-packages/simgrid<EXT_SUFFIX>``,
   when it was built for this interpreter's version.

The module from 3. is loaded by path alone (``importlib.util.spec_from_file_location``), not by
adding ``dist-packages`` to ``sys.path``: Debian's numpy there must not shadow the
environment's. ``locate()`` finds it without loading it (``available()``: the test suite's
check). Without SimGrid, ``load()`` raises ``SimGridMissing`` with one line that says what was
tried and how to install it (``docs/simulation.md``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from ..errors import SimGridMissing  # noqa: F401  (raised here)

VARIABLE = "HARNESS_SIMGRID_MODULE"
DEBIAN_DIR = Path("/usr/lib/python3/dist-packages")
INSTALL_HINT = ("install it: Debian/Ubuntu `apt-get install python3-simgrid libsimgrid-dev` "
                "(.ci/simgrid.sh), elsewhere conda-forge's simgrid or a build from source "
                "(docs/simulation.md)")


def debian_module() -> Path:
    """Where Debian's python3-simgrid puts the module for this interpreter."""
    return DEBIAN_DIR / f"simgrid{sysconfig.get_config_var('EXT_SUFFIX')}"


def locate() -> str | Path:
    """What ``load()`` would load, without loading it: ``"simgrid"`` (importable as such) or
    the extension module's path. ``SimGridMissing`` when there is neither."""
    if sys.modules.get("simgrid") is not None:
        return "simgrid"
    explicit = os.environ.get(VARIABLE)
    if explicit:
        if not Path(explicit).is_file():
            raise SimGridMissing(f"{VARIABLE} names {explicit}, which is not a file; {INSTALL_HINT}")
        return Path(explicit)
    try:
        if importlib.util.find_spec("simgrid") is not None:
            return "simgrid"
    except (ImportError, ValueError):
        pass
    path = debian_module()
    if not path.is_file():
        raise SimGridMissing(f"no SimGrid Python module: `import simgrid` fails and Debian's python3-simgrid "
                             f"for Python {sys.version_info.major}.{sys.version_info.minor} is not at {path}; "
                             f"{INSTALL_HINT}")
    return path


def load():
    """The ``simgrid`` module (loaded once per process), or ``SimGridMissing``."""
    if sys.modules.get("simgrid") is not None:
        return sys.modules["simgrid"]
    where = locate()
    if where == "simgrid":
        return importlib.import_module("simgrid")
    spec = importlib.util.spec_from_file_location("simgrid", where)
    if spec is None or spec.loader is None:
        raise SimGridMissing(f"{where} is not a Python extension module; {INSTALL_HINT}")
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise SimGridMissing(f"SimGrid's Python module {where} does not load here "
                             f"({str(exc).splitlines()[0]}); {INSTALL_HINT}") from exc
    sys.modules["simgrid"] = module
    return module


def available() -> str | None:
    """None when SimGrid is there to load (``locate``; this process does not load it), else
    the one line saying why not."""
    try:
        locate()
    except SimGridMissing as exc:
        return str(exc)
    return None



@functools.lru_cache(maxsize=None)
def version() -> str:
    """SimGrid's version (``3.32``), read by loading the module in a child process: loading it
    prints SimGrid's start-up lines, which this process keeps out of its own output."""
    code = ("import sys; from harness.simulate import loader; v = loader.load().simgrid_version; "
            "v = v if isinstance(v, str) else '.'.join(map(str, v)); "
            "sys.stderr.write('harness-simgrid-version ' + v + chr(10))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2])
    m = re.search(r"harness-simgrid-version ([0-9.]+)", proc.stderr)
    if not m:
        raise SimGridMissing(f"SimGrid's Python module does not load here "
                             f"({(proc.stderr.strip().splitlines() or ['no output'])[-1]}); "
                             f"{INSTALL_HINT}")
    parts = m.group(1).split(".")
    while len(parts) > 2 and parts[-1] == "0":
        parts.pop()
    return ".".join(parts)
