"""SimGrid's Python module, found without putting a foreign ``site-packages`` on ``sys.path``.

Where it is looked for, in order:

1. ``HARNESS_SIMGRID_MODULE``: the path of the extension module (``simgrid.cpython-*.so``);
2. an importable ``simgrid`` (SimGrid installed into this environment: conda-forge, or a
   build from source with ``pip install .``);
3. Debian's ``python3-simgrid``: ``/usr/lib/python3/dist-packages/simgrid<EXT_SUFFIX>``,
   when it was built for this interpreter's version.

The module from 3. is loaded by path alone (``importlib.util.spec_from_file_location``), not by
adding ``dist-packages`` to ``sys.path``: Debian's numpy there must not shadow the
environment's. Without SimGrid, ``load()`` raises ``SimGridMissing`` with one line that says
what was tried and how to install it (``docs/simulation.md``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

VARIABLE = "HARNESS_SIMGRID_MODULE"
DEBIAN_DIR = Path("/usr/lib/python3/dist-packages")
INSTALL_HINT = ("install it: Debian/Ubuntu `apt-get install python3-simgrid libsimgrid-dev` "
                "(.ci/simgrid.sh), elsewhere conda-forge's simgrid or a build from source "
                "(docs/simulation.md)")


class SimGridMissing(RuntimeError):
    """SimGrid's Python module cannot be loaded; the message is one line."""


def debian_module() -> Path:
    """Where Debian's python3-simgrid puts the module for this interpreter."""
    return DEBIAN_DIR / f"simgrid{sysconfig.get_config_var('EXT_SUFFIX')}"


def _from_path(path: Path, explicit: bool):
    if not path.is_file():
        where = (f"{VARIABLE} names {path}, which is not a file" if explicit else
                 f"no SimGrid Python module: `import simgrid` fails and Debian's python3-simgrid "
                 f"for Python {sys.version_info.major}.{sys.version_info.minor} is not at {path}")
        raise SimGridMissing(f"{where}; {INSTALL_HINT}")
    spec = importlib.util.spec_from_file_location("simgrid", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise SimGridMissing(f"SimGrid's Python module {path} does not load here "
                             f"({str(exc).splitlines()[0]}); {INSTALL_HINT}") from exc
    sys.modules["simgrid"] = module
    return module


def load():
    """The ``simgrid`` module (loaded once per process), or ``SimGridMissing``."""
    if sys.modules.get("simgrid") is not None:
        return sys.modules["simgrid"]
    explicit = os.environ.get(VARIABLE)
    if explicit:
        return _from_path(Path(explicit), True)
    try:
        return importlib.import_module("simgrid")
    except ImportError:
        pass
    return _from_path(debian_module(), False)


def available() -> str | None:
    """None when SimGrid loads, else the one line saying why not."""
    try:
        load()
    except SimGridMissing as exc:
        return str(exc)
    return None
