"""Every exception class of the harness, in one place: each names what was wrong in words a
user can act on; the command line prints those of bad input as one line and exits 2.
"""

from __future__ import annotations


# raised by config.py
class ConfigError(ValueError):
    """A mistake in the config; the message starts with the key path."""


# raised by layout.py
class LayoutError(ValueError):
    """A layout parameter that cannot be used (names the key, the value and what was expected)."""


# raised by mpit.py
class ForcingError(RuntimeError):
    """The running library cannot force the asked algorithm on a communicator."""


# raised by results.py
class StoreError(Exception):
    """A file of the results store that cannot be used; the message names it and the way out."""


# raised by netparams.py
class FitError(ValueError):
    """A campaign (or part of it) from which the asked parameters cannot be fitted."""


# raised by tune.py
class TuneError(Exception):
    """Bad input: one line for the user, exit 2."""


# raised by rerun.py
class UnknownCell(ValueError):
    """A cell id that no campaign store holds."""


# raised by simulate/ (loader.py, cell.py, smpi.py)
class SimGridMissing(RuntimeError):
    """SimGrid's Python module cannot be loaded; the message is one line."""


class SimulationError(RuntimeError):
    """The simulation did not finish: an algorithm raised, or the ranks deadlocked."""


class SmpiMissing(RuntimeError):
    """smpicc or smpirun is not on PATH; the message is one line."""


class SmpiError(RuntimeError):
    """smpirun failed or printed no times."""


class SmpiUnavailable(ValueError):
    """A native algorithm of a family that SMPI has no counterpart of (names family, algorithm, why)."""

    def __init__(self, family: str, algorithm: str, why: str):
        self.family, self.algorithm, self.why = family, algorithm, why
        super().__init__(f"{family} native:{algorithm} cannot be simulated by SMPI: {why}")
