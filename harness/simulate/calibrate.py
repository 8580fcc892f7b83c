"""A simulated platform's numbers taken from a measured campaign's fit (``calibrate_from:``).

An experiment's ``platform:`` block may name a campaign instead of (or beside) its latency,
bandwidth and reduction rate::

    platform: {kind: simulated, topology: cluster, nodes: 1, cores_per_node: 2,
               calibrate_from: default, calibrate_library: openmpi}

``calibrated(platform, results_root)`` reads ``<results_root>/<campaign>/model_params.json``
(``harness fit <campaign>``, or the workflow's rule ``fit_params``:
``harness/analysis/netparams.py``) and fills in what the block does not give itself:

====================================  ==================================================
field of the platform                 taken from ``model_params.json``
====================================  ==================================================
``latency``, ``bandwidth``            ``pingpong[lib].levels.network``: alpha, 1 / beta
``intra_latency``, ``intra_bandwidth``  ``pingpong[lib].levels.node``, else ``...socket``:
                                      alpha, 1 / beta
``reduce_rate``                       1 / gamma: ``pingpong[lib].gamma`` (the library's
                                      reduce_local fit), else the file's ``gamma``
====================================  ==================================================

The inter-node link (``latency``, ``bandwidth``) comes only from ping-pong between nodes
(level ``network``); the loopback link inside a node (``intra_*``) from ping-pong inside one
node, level ``node`` (two sockets, the dearer path, as the max-rate fit takes it) and else
``socket``. A campaign on one node measured no ``network`` level: its fit calibrates the
``intra_*`` fields only. A level is needed only when the platform uses that link and the block
does not give its numbers: ``network`` when ``nodes > 1``, the intra-node level when
``cores_per_node > 1``. A level that is needed and missing, like a missing campaign or file,
raises ``ConfigError`` naming ``platform.calibrate_from``, its value, the file looked for and
how to make it.

The library is ``calibrate_library:`` when given, else the first library of the file's
``pingpong`` section (``netparams`` puts Open MPI first). A value given explicitly in the block
is never replaced (it stays as written: ``1us``, ``12.5GB/s``); calibrated values are numbers
(seconds, bytes per second). The provenance says which campaign, file (and its SHA-256),
library and level gave which value, and which fields were given explicitly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError

KEY = "platform.calibrate_from"
LIBRARY_KEY = "platform.calibrate_library"
INTER_LEVELS = ("network",)
INTRA_LEVELS = ("node", "socket")
# field -> (which link, "alpha" or "beta")
LINK_FIELDS = {"latency": ("inter", "alpha"), "bandwidth": ("inter", "beta"),
               "intra_latency": ("intra", "alpha"), "intra_bandwidth": ("intra", "beta")}


def _how(campaign: str) -> str:
    return (f"run campaign {campaign!r} with its ping-pong (and reduce_local) experiments, "
            f"then `harness fit {campaign}` (or the workflow's rule fit_params) writes it")


def _given(platform: Mapping, key: str) -> bool:
    return platform.get(key) not in (None, "")


def _int(platform: Mapping, key: str, default: int) -> int:
    try:
        return int(platform.get(key, default) or default)
    except (TypeError, ValueError):
        raise ConfigError(f"platform.{key}: expected a whole number, got "
                          f"{platform.get(key)!r}") from None


def read_params(campaign: str, results_root) -> tuple[Path, bytes, dict]:
    """``model_params.json`` of ``campaign`` under ``results_root``: (path, bytes, document).
    ConfigError (module doc) when the campaign or the file is missing or unreadable."""
    if not isinstance(campaign, str) or not campaign.strip() or "/" in campaign:
        raise ConfigError(f"{KEY}: expected the name of a campaign under {results_root}, got "
                          f"{campaign!r}")
    path = Path(results_root) / campaign / "model_params.json"
    if not path.parent.is_dir():
        raise ConfigError(f"{KEY}: {campaign!r}: no campaign directory {path.parent}, so no "
                          f"{path}; {_how(campaign)}")
    if not path.is_file():
        raise ConfigError(f"{KEY}: {campaign!r}: no {path}; {_how(campaign)}")
    data = path.read_bytes()
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise ConfigError(f"{KEY}: {campaign!r}: {path} is not JSON ({e}); {_how(campaign)}") \
            from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{KEY}: {campaign!r}: {path} holds no JSON object; {_how(campaign)}")
    return path, data, doc


def _level(fit: Mapping, order, campaign: str, path: Path, library: str, what: str) -> tuple[str, dict]:
    levels = fit.get("levels") or {}
    if not levels and fit.get("level") and "alpha" in fit:  # a file with the chosen level only
        levels = {fit["level"]: {"alpha": fit["alpha"], "beta": fit["beta"]}}
    for lv in order:
        if isinstance(levels.get(lv), Mapping) and "alpha" in levels[lv]:
            return lv, levels[lv]
    have = ", ".join(levels) or "none"
    raise ConfigError(
        f"{KEY}: {campaign!r}: {path} has no ping-pong fit of {library} at level "
        f"{' or '.join(order)} (it has: {have}), which the {what} needs; measure ping-pong "
        f"{'between two nodes' if order == INTER_LEVELS else 'inside one node'} in campaign "
        f"{campaign!r}, then `harness fit {campaign}`; or give the platform's "
        f"{'latency and bandwidth' if order == INTER_LEVELS else 'intra_latency and intra_bandwidth'} "
        "explicitly")


def calibrated(platform: Mapping, results_root) -> tuple[dict, dict]:
    """``platform`` with the fields of its ``calibrate_from`` campaign's fit filled in where the
    block does not give them, and the provenance (module doc). Without ``calibrate_from``: the
    block unchanged (a copy) and ``{}``."""
    out = dict(platform)
    campaign = out.get("calibrate_from")
    if campaign in (None, ""):
        return out, {}
    path, data, doc = read_params(campaign, results_root)
    pingpong = doc.get("pingpong") or {}
    if not isinstance(pingpong, Mapping) or not pingpong:
        raise ConfigError(f"{KEY}: {campaign!r}: {path} has no ping-pong fit (no 'pingpong' "
                          f"section: the campaign has no ping-pong cells); {_how(campaign)}")
    library = out.get("calibrate_library")
    if library in (None, ""):
        library = next(iter(pingpong))
    elif library not in pingpong:
        raise ConfigError(f"{LIBRARY_KEY}: {library!r}: {path} has ping-pong fits of "
                          f"{', '.join(pingpong)} only")
    fit = pingpong[library]
    nodes = _int(out, "nodes", 1)
    cores = _int(out, "cores_per_node", 1)
    given = sorted(k for k in (*LINK_FIELDS, "reduce_rate") if _given(out, k))
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for link, order, used, what in (("inter", INTER_LEVELS, nodes > 1, "inter-node link"),
                                    ("intra", INTRA_LEVELS, cores > 1, "intra-node link")):
        fields = [f for f, (lk, _) in LINK_FIELDS.items() if lk == link and f not in given]
        if not fields:
            continue
        levels = fit.get("levels") or {}
        if not used and not any(lv in levels for lv in order):
            continue  # a link the platform does not use, and the fit has nothing for it
        level, pair = _level(fit, order, campaign, path, library, what)
        for f in fields:
            param = LINK_FIELDS[f][1]
            x = float(pair[param])
            if param == "beta":
                if not x > 0:
                    raise ConfigError(f"{KEY}: {campaign!r}: {path}: {library}'s beta at level "
                                      f"{level} is {x}, so no bandwidth (1/beta); give "
                                      f"platform.{f} explicitly or measure larger messages")
                values[f] = 1.0 / x
                sources[f] = f"1/beta of {library}'s ping-pong at level {level}"
            else:
                values[f] = x
                sources[f] = f"alpha of {library}'s ping-pong at level {level}"
    if "reduce_rate" not in given:
        gamma, origin = fit.get("gamma"), f"{library}'s reduce_local fit (pingpong.{library}.gamma)"
        if gamma is None:
            gamma, origin = doc.get("gamma"), "the file's gamma"
        if gamma is None or not float(gamma) > 0:
            raise ConfigError(f"{KEY}: {campaign!r}: {path} has no positive gamma for the "
                              f"reduction rate; measure reduce_local cells in {campaign!r} and "
                              "`harness fit` again, or give platform.reduce_rate explicitly")
        values["reduce_rate"] = 1.0 / float(gamma)
        sources["reduce_rate"] = f"1/gamma: {origin}"
    out.update(values)
    provenance = {"campaign": campaign, "file": str(path),
                  "sha256": hashlib.sha256(data).hexdigest(), "library": library,
                  "values": values, "sources": sources, "given": given}
    return out, provenance
