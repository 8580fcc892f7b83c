"""Where things live: the repository root, the local MPI prefixes, the results store."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = REPO_ROOT / "slurm_templates"


def mpi_root() -> Path:
    """Root of the local MPI installs (one prefix per library); ``HARNESS_MPI_ROOT`` overrides."""
    return Path(os.environ.get("HARNESS_MPI_ROOT", REPO_ROOT / ".mpi")).resolve()


def results_root() -> Path:
    """Root of the results store; ``HARNESS_RESULTS`` overrides (tests use a temporary one)."""
    return Path(os.environ.get("HARNESS_RESULTS", REPO_ROOT / "results")).resolve()


def figures_root() -> Path:
    """Root of the figures; ``HARNESS_FIGURES`` overrides."""
    return Path(os.environ.get("HARNESS_FIGURES", REPO_ROOT / "figures")).resolve()
