"""What a simulated experiment can ask for, decided when it is planned: the cells a simulation
cannot honour are refused before anything runs (``check``), and a native algorithm SMPI has
no copy of is ``not-applicable`` with the reason (``not_simulable``), never simulated under
another algorithm's name (docs/simulation.md)."""

from __future__ import annotations

from ..cells import PROBES, SELECTORS, WORKLOAD_KEY
from ..errors import ConfigError, SmpiUnavailable
from ..simulate import natives


def check(ex, source: str) -> None:
    """ConfigError naming the key of what a simulated experiment cannot simulate: probes,
    selectors that follow a tuning file or an autotuner, IMB timing, rotated buffers."""
    where = f"{source}: experiments.{ex.name}"
    for i, alg in enumerate(ex.algorithms):
        if alg in PROBES or alg in SELECTORS:
            raise ConfigError(f"{where}.algorithms[{i}]: {alg!r} is not simulated (it needs a "
                              f"library or a network to measure); measure it in an experiment "
                              f"without platform")
    if WORKLOAD_KEY in dict(ex.params):
        raise ConfigError(f"{where}.workload: a training iteration's calls are not simulated; "
                          f"simulate its sizes as single calls (sizes:) instead")
    if ex.timing != "percall":
        raise ConfigError(f"{where}.timing: {ex.timing!r}: a simulated call is timed exactly, "
                          f"one call at a time; expected percall (the default)")
    if ex.buffers != "reuse":
        raise ConfigError(f"{where}.buffers: {ex.buffers!r}: the simulated platform has no "
                          f"caches; expected reuse (the default)")


def not_simulable(lib, cell) -> str | None:
    """Why SMPI has no copy of the native algorithm of ``cell`` in ``lib``'s family (None when
    it has, or the cell is the harness's own algorithm, simulated unchanged)."""
    if cell.kind != "native":
        return None
    try:
        natives.smpi_choice(lib.family, cell.algorithm)
    except SmpiUnavailable as exc:
        return f"not applicable on a simulated platform: {exc}"
    return None
