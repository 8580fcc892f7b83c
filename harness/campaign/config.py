"""Load and check ``config/experiments.yaml`` against ``workflow/schemas/``.

The schema (JSON Schema, draft-07) holds the defaults and rejects unknown keys; on top of it
this module parses sizes and times and checks what a schema cannot (algorithm names against
the catalogue, a late rank inside every P, ...). Every error names the key path, the value
found and what was expected: ``experiments.demo.sizes[1]: expected a size such as 64KiB …``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import jsonschema
import yaml

from .. import layout, paths
from ..algorithms import REGISTRY, load_plugin
from ..dnn.workload import DEFAULTS, KEY
from ..errors import ConfigError, LayoutError
from ..libraries import (FAMILIES, check_site, declare, family_of, library_sort_key,
                         simulated_name, split_name)
from ..units import parse_size, parse_time
from .platforms import resolve as resolve_platforms

SCHEMA_FILE = paths.REPO_ROOT / "workflow" / "schemas" / "experiments.schema.yaml"
DEFAULT_CONFIG = paths.REPO_ROOT / "config" / "experiments.yaml"


def _path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _with_defaults(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_Validator = _with_defaults(jsonschema.Draft7Validator)


OVERSUBSCRIBE_FACTOR = 4  # ranks per core a local launch may start without being told to


def too_many_ranks(procs: int) -> bool:
    """More ranks than ``OVERSUBSCRIBE_FACTOR`` per core of this machine."""
    return procs > OVERSUBSCRIBE_FACTOR * (os.cpu_count() or 1)


def schema() -> dict:
    with open(SCHEMA_FILE) as fh:
        return yaml.safe_load(fh)


@dataclass(frozen=True)
class Experiment:
    name: str
    libraries: tuple
    algorithms: tuple  # patterns as written
    procs: tuple
    nodes: int
    sizes: tuple  # bytes
    dtypes: tuple
    ops: tuple
    delays: tuple
    max_delays: tuple  # seconds
    late_rank: int
    params: tuple  # sorted (key, value)
    thread_level: str = "auto"  # auto: the lowest level each cell needs (cells.needed_thread_level)
    timing: str = "percall"
    buffers: str = "reuse"
    platform: str | None = None  # a simulated platform's name (Config.platforms); None: measured


@dataclass(frozen=True)
class Config:
    campaign: str
    seed: int
    launch: str
    run_walltime: float
    stopping: dict  # settings handed to the bench
    libraries: dict  # site descriptions by library name
    experiments: tuple
    source: str
    digest: str  # hash of the validated config (provenance)
    plugins: tuple = ()  # absolute paths of algorithm plugins
    confirm: dict = None  # the confirmation stage (harness.campaign.confirm): enabled, rounds, time_budget
    tune: dict = None  # tuned selection (harness.campaign.tune, harness.campaign.tune_verify): enabled, rounds, ...
    sgd: dict = None  # distributed SGD experiments by name (harness.measure.sgd), as validated by sgd_experiment
    report: dict = None  # report options: reference_library (resolved to a campaign library)
    allow_failures: bool = False  # harness status exits 0, not 3, with failed/timeout/wrong cells
    auto_ran: bool = True  # the stage that sees what AUTO ran (harness.campaign.auto_ran)
    platforms: dict = None  # name -> platforms.SimulatedPlatform, the ones experiments name

    def simulated(self, library: str):
        """The SimulatedPlatform of a simulated installation ``<family>@<platform>``, else None."""
        return (self.platforms or {}).get(split_name(library)[1])


def validate(doc, source: str = "config", base: Path | None = None) -> Config:
    """The checked config with defaults filled in; ConfigError naming the key path."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(doc).__name__}")
    given, doc = doc, copy.deepcopy(doc)
    errors = sorted(_Validator(schema()).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = min(errors, key=lambda e: (len(list(e.absolute_path)), list(map(str, e.absolute_path))))
        raise ConfigError(f"{source}: {_path(e.absolute_path)}: {_explain(e)}")
    parsed = _Parser(source)
    stopping, confirm, walltime = _stopping(doc, parsed), _confirm(doc, parsed), _walltime(doc, parsed)
    _installations(doc, source)
    platforms = resolve_platforms(doc, source, paths.results_root())
    plugins = _plugins(doc, source, base)
    experiments = [_experiment(name, e, doc, parsed)
                   for name, e in doc["experiments"].items() if e["enabled"]]
    if not experiments:
        raise ConfigError(f"{source}: experiments: every experiment is disabled")
    report = _report(doc, given, experiments, source)
    digest = hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return Config(campaign=doc["campaign"], seed=doc["seed"], launch=doc["launch"],
                  run_walltime=walltime, stopping=stopping, libraries=doc["libraries"],
                  experiments=tuple(experiments), source=source, digest=digest,
                  plugins=tuple(plugins), confirm=confirm, tune=dict(doc["tune"]),
                  sgd=_sgd(doc, source), report=report,
                  allow_failures=bool(doc.get("allow_failures", False)),
                  auto_ran=bool(doc["auto_ran"]["enabled"]), platforms=platforms)


class _Parser:
    """Sizes and times parsed, a ValueError becoming a ConfigError naming the key path."""

    def __init__(self, source: str):
        self.source = source

    def __call__(self, parse, value, where):
        try:
            return parse(value)
        except ValueError as exc:
            raise ConfigError(f"{self.source}: {where}: {exc}") from None

    def fail(self, where: str, message: str):
        raise ConfigError(f"{self.source}: {where}: {message}")


def _stopping(doc: dict, parsed: _Parser) -> dict:
    """The ``stopping:`` settings handed to the bench, sizes and times parsed."""
    stopping = dict(doc["stopping"])
    for key, parse in (("time_budget", parse_time), ("base_compute", parse_time),
                       ("max_volume", parse_size), ("oversubscribed_time_budget", parse_time)):
        stopping[key] = parsed(parse, stopping[key], f"stopping.{key}")
    if not stopping["time_budget"] > 0:
        parsed.fail("stopping.time_budget", f"expected a time > 0, got "
                                            f"{doc['stopping']['time_budget']!r}")
    if stopping["min_reps"] > stopping["max_reps"]:
        parsed.fail("stopping.min_reps", f"{stopping['min_reps']} exceeds stopping.max_reps "
                                         f"{stopping['max_reps']}")
    return stopping


def _confirm(doc: dict, parsed: _Parser) -> dict:
    confirm = dict(doc["confirm"])
    confirm["time_budget"] = parsed(parse_time, confirm["time_budget"], "confirm.time_budget")
    if confirm["time_budget"] <= 0:
        parsed.fail("confirm.time_budget", f"expected a time > 0, got "
                                           f"{doc['confirm']['time_budget']!r}")
    return confirm


def _walltime(doc: dict, parsed: _Parser) -> float:
    walltime = parsed(parse_time, doc["run_walltime"], "run_walltime")
    if walltime <= 0:
        parsed.fail("run_walltime", f"expected a time > 0, got {doc['run_walltime']!r}")
    return walltime


def _plugins(doc: dict, source: str, base: Path | None) -> list[str]:
    """The plugins' absolute paths, each loaded (its algorithms registered)."""
    plugins = []
    for i, p in enumerate(doc["plugins"]):
        path = Path(p) if Path(p).is_absolute() else (base or Path.cwd()) / p
        if not path.is_file():
            raise ConfigError(f"{source}: plugins[{i}]: no such file {p!r}")
        load_plugin(path)
        plugins.append(str(path.resolve()))
    return plugins


def _experiment(name: str, e: dict, doc: dict, parsed: _Parser) -> Experiment:
    """The enabled experiment ``name`` checked, its sizes and times parsed."""
    where = f"experiments.{name}"
    params = dict(e["params"])
    if e.get("workload"):
        params.update(_workload_params(e, where, parsed.source, parsed))
    elif "sizes" not in e:
        parsed.fail(where, "'sizes' is missing (required unless the experiment has a workload)")
    sizes = tuple(parsed(parse_size, s, f"{where}.sizes[{i}]")
                  for i, s in enumerate(e.get("sizes", ())))
    max_delays = tuple(parsed(parse_time, t, f"{where}.max_delays[{i}]")
                       for i, t in enumerate(e["max_delays"]))
    if e["late_rank"] >= min(e["procs"]) and any(d == "one-late" for d in e["delays"]):
        parsed.fail(f"{where}.late_rank", f"{e['late_rank']} is not a rank of P={min(e['procs'])} "
                                          f"(expected 0..{min(e['procs']) - 1})")
    if any(d != "none" for d in e["delays"]) and not any(t > 0 for t in max_delays):
        parsed.fail(f"{where}.max_delays", f"delay modes {[d for d in e['delays'] if d != 'none']} "
                                           f"need a max delay > 0")
    libraries = tuple(e["libraries"])
    if e.get("platform"):  # simulated: SMPI's copy of each family, on the platform
        libraries = tuple(simulated_name(lib, e["platform"]) for lib in libraries)
        for lib, family in zip(libraries, e["libraries"]):
            declare(lib, family)
    else:
        _procs(e, where, doc, parsed)
    _layouts(e["procs"], params, where, parsed)
    return Experiment(
        name=name, libraries=libraries, platform=e.get("platform"), algorithms=tuple(e["algorithms"]),
        procs=tuple(e["procs"]), nodes=e["nodes"], sizes=sizes, dtypes=tuple(e["dtypes"]),
        ops=tuple(e["ops"]), delays=tuple(e["delays"]), max_delays=max_delays,
        late_rank=e["late_rank"], thread_level=e["thread_level"], timing=e["timing"],
        buffers=e["buffers"], params=tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                                  for k, v in params.items())))


def _procs(e: dict, where: str, doc: dict, parsed: _Parser) -> None:
    """Every P spans the experiment's nodes; a local launch is refused more than
    ``OVERSUBSCRIBE_FACTOR`` ranks per core unless the experiment says ``oversubscribe``."""
    local = doc["launch"] != "srun" and not any(
        (doc["libraries"] or {}).get(lib) for lib in e["libraries"])
    for i, p in enumerate(e["procs"]):
        if p < e["nodes"]:
            parsed.fail(f"{where}.procs[{i}]", f"{p} processes cannot span {e['nodes']} nodes")
        if local and not e["oversubscribe"] and too_many_ranks(p):
            parsed.fail(f"{where}.procs[{i}]", f"{p} ranks on this machine's {os.cpu_count()} "
                                               f"cores is more than {OVERSUBSCRIBE_FACTOR} per "
                                               f"core; set {where}.oversubscribe: true to run it "
                                               f"anyway")


def _layouts(procs, params: dict, where: str, parsed: _Parser) -> None:
    """The node layout parameters (``layout``, ``ppn``; ``harness.layout``) of every
    combination of their values, at every P: an emulated layout's ppn divides P."""
    if "layout" not in params and "ppn" not in params:
        return
    def values(key):  # a list is a sweep
        value = params.get(key)
        return value if isinstance(value, list) else [value]

    for kind, ppn in product(values("layout"), values("ppn")):
        given = {k: v for k, v in (("layout", kind), ("ppn", ppn)) if v is not None}
        try:
            kind, ppn = layout.parse(given)
            for p in procs if kind == "emulated" else ():
                layout.emulated(p, ppn)
        except LayoutError as exc:
            parsed.fail(where, str(exc))


def _installations(doc: dict, source: str) -> None:
    """Check each ``libraries.<name>`` declaration (family, launcher, env names) and make its
    name known; every library an experiment or an SGD experiment names must be a wheel's
    family or declared. ConfigError naming the key path."""
    declared = doc["libraries"] or {}
    for name, site in declared.items():
        try:
            check_site(name, site)
            declare(name, family_of(name, site))
        except (ValueError, KeyError) as exc:
            raise ConfigError(f"{source}: {exc.args[0]}") from None
    known = sorted(set(FAMILIES) | set(declared))
    uses = [(f"experiments.{n}.libraries[{i}]", lib) for n, e in doc["experiments"].items()
            for i, lib in enumerate(e["libraries"])]
    uses += [(f"sgd.{n}.library", e["library"]) for n, e in doc["sgd"].items()]
    for where, lib in uses:
        if lib not in known:
            raise ConfigError(f"{source}: {where}: {lib!r} is not declared under libraries nor a "
                              f"wheel ({', '.join(FAMILIES)}); expected one of {', '.join(known)}")


def _report(doc: dict, given: dict, experiments: list, source: str) -> dict:
    """The report options; ``reference_library`` must be a library of an enabled experiment.
    Left out, it is Intel MPI when the campaign measures it, else the campaign's first library
    (MPICH, Open MPI, Intel MPI order)."""

    libraries = sorted({lib for e in experiments for lib in e.libraries}, key=library_sort_key)
    report = dict(doc["report"])
    ref = report["reference_library"]
    if "reference_library" in (given.get("report") or {}):
        if ref not in libraries:
            raise ConfigError(f"{source}: report.reference_library: {ref!r} is not a library of "
                              f"the campaign; expected one of {', '.join(libraries)}")
    elif ref not in libraries:
        report["reference_library"] = libraries[0]
    return report


def _workload_params(e: dict, where: str, source: str, parsed) -> dict:
    """A workload experiment's block as cell parameters: models, policies and precisions
    are sweeps; ``sizes`` must be left out (they come from the traces)."""

    if "sizes" in e:
        raise ConfigError(f"{source}: {where}.sizes: a workload experiment takes its sizes from "
                          f"the model traces; leave sizes out")
    taken = sorted((set(DEFAULTS) | {KEY}) & set(e["params"]))
    if taken:
        raise ConfigError(f"{source}: {where}.params: {', '.join(taken)} belong(s) under "
                          f"{where}.workload, not params")
    w = e["workload"]
    compute = parsed(parse_time, w["compute"], f"{where}.workload.compute")
    return {KEY: list(w["models"]), "fusion": list(w["fusion"]),
            "precision": list(w["precision"]), "batch": w["batch"], "iteration_compute": compute}


def _sgd(doc: dict, source: str) -> dict:
    """The enabled ``sgd:`` experiments by name, checked and with times parsed by
    ``sgd_experiment`` (ConfigError naming the key path)."""
    return {k: sgd_experiment(k, v, source, doc["launch"], doc["libraries"])
            for k, v in doc["sgd"].items() if v.get("enabled", True)}


# The distributed-SGD experiments (config key ``sgd:``, harness/measure/sgd.py, harness/campaign/sgd_stage.py, docs/sgd.md).
SGD_DEFAULTS = {
    "enabled": True, "nodes": 1, "algorithms": ["ring", "slt", "prr"], "iterations": 390,
    "batch": 8, "executions": 3, "straggler": 0, "straggler_rank": "random", "lr": 0.01,
    "seed": 0, "noise": 4.0, "edge": "auto", "test_images": 1000, "tau": "auto",
}


def sgd_experiment(name: str, block: dict, source: str = "config", launch: str = "local",
                   sites: dict | None = None) -> dict:
    """The checked ``sgd.<name>`` block with defaults and parsed times (``straggler`` in
    seconds); ConfigError naming the key path. ``launch`` and ``sites`` (the config's
    ``launch`` and ``libraries``) decide whether the local rank limit applies. Idempotent."""
    where = f"{source}: sgd.{name}"
    e = {**SGD_DEFAULTS, **block}
    for i, alg in enumerate(e["algorithms"]):
        if alg not in REGISTRY or alg.startswith("native:"):
            raise ConfigError(f"{where}.algorithms[{i}]: unknown harness algorithm {alg!r}; "
                              f"valid: {', '.join(sorted(REGISTRY))}")
    try:
        e["straggler"] = parse_time(e["straggler"])
    except ValueError as exc:
        raise ConfigError(f"{where}.straggler: {exc}") from None
    if e["straggler"] < 0:
        raise ConfigError(f"{where}.straggler: expected a time >= 0, got {block['straggler']!r}")
    r = e["straggler_rank"]
    if r != "random" and not (isinstance(r, int) and 0 <= r < e["procs"]):
        raise ConfigError(f"{where}.straggler_rank: expected 'random' or a rank 0..{e['procs'] - 1}"
                          f", got {r!r}")
    if e["edge"] != "auto" and not (isinstance(e["edge"], (int, float)) and 0 < e["edge"] < 1):
        raise ConfigError(f"{where}.edge: expected 'auto' or a fraction between 0 and 1, got "
                          f"{e['edge']!r}")
    if e["tau"] != "auto":
        try:
            if not parse_time(e["tau"]) > 0:
                raise ValueError("expected a time > 0")
        except ValueError as exc:
            raise ConfigError(f"{where}.tau: {exc} or 'auto'") from None
    if e["procs"] < e["nodes"]:
        raise ConfigError(f"{where}.procs: {e['procs']} processes cannot span {e['nodes']} nodes")
    local = launch != "srun" and not (sites or {}).get(e["library"])
    if local and too_many_ranks(e["procs"]):
        raise ConfigError(f"{where}.procs: {e['procs']} ranks on this machine's "
                          f"{os.cpu_count()} cores is more than {OVERSUBSCRIBE_FACTOR} per core")
    return e


def _explain(err) -> str:
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        return (f"unknown key(s) {', '.join(map(repr, extra))}; expected one of: "
                + ", ".join(allowed))
    if err.validator == "enum":
        return f"{err.instance!r} is not one of {', '.join(map(str, err.validator_value))}"
    if err.validator == "required":
        return err.message.replace("is a required property", "is missing (required)")
    if err.validator == "type":
        return f"expected {err.validator_value}, got {err.instance!r}"
    if err.validator == "pattern" or err.validator == "propertyNames":
        pattern = (err.validator_value if err.validator == "pattern"
                   else (err.validator_value or {}).get("pattern", ""))
        if pattern == "^[a-z][a-z0-9_]*$":  # installations and platforms
            return (f"{err.instance!r} is not a valid name (a lower-case letter, then lower-case "
                    f"letters, digits and '_')")
        return f"{err.instance!r} is not a valid name (letters, digits, '.', '_', '-')"
    return f"{err.message}"


def load(path: str | Path | None = None, overrides: dict | None = None) -> Config:
    """Read and check a config file (default ``config/experiments.yaml``)."""
    path = Path(path or DEFAULT_CONFIG)
    try:
        with open(path) as fh:
            doc = yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if overrides:
        doc = {**(doc or {}), **overrides}
    return validate(doc, source=str(path), base=path.parent)
