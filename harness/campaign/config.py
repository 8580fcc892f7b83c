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
from pathlib import Path

import jsonschema
import yaml

from .. import paths
from ..algorithms import REGISTRY, load_plugin
from ..dnn.workload import DEFAULTS, KEY
from ..errors import ConfigError
from ..libraries import FAMILIES, check_site, declare, family_of, library_sort_key
from ..units import parse_size, parse_time

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


def validate(doc, source: str = "config", base: Path | None = None) -> Config:
    """The checked config with defaults filled in; ConfigError naming the key path."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(doc).__name__}")
    given, doc = doc, copy.deepcopy(doc)
    errors = sorted(_Validator(schema()).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = min(errors, key=lambda e: (len(list(e.absolute_path)), list(map(str, e.absolute_path))))
        raise ConfigError(f"{source}: {_path(e.absolute_path)}: {_explain(e)}")

    def parsed(parse, value, where):
        try:
            return parse(value)
        except ValueError as exc:
            raise ConfigError(f"{source}: {where}: {exc}") from None

    stopping = dict(doc["stopping"])
    stopping["time_budget"] = parsed(parse_time, stopping["time_budget"], "stopping.time_budget")
    stopping["base_compute"] = parsed(parse_time, stopping["base_compute"], "stopping.base_compute")
    stopping["max_volume"] = parsed(parse_size, stopping["max_volume"], "stopping.max_volume")
    stopping["oversubscribed_time_budget"] = parsed(
        parse_time, stopping["oversubscribed_time_budget"], "stopping.oversubscribed_time_budget")
    if stopping["min_reps"] > stopping["max_reps"]:
        raise ConfigError(f"{source}: stopping.min_reps: {stopping['min_reps']} exceeds "
                          f"stopping.max_reps {stopping['max_reps']}")
    confirm = dict(doc["confirm"])
    confirm["time_budget"] = parsed(parse_time, confirm["time_budget"], "confirm.time_budget")
    if confirm["time_budget"] <= 0:
        raise ConfigError(f"{source}: confirm.time_budget: expected a time > 0, got "
                          f"{doc['confirm']['time_budget']!r}")
    walltime = parsed(parse_time, doc["run_walltime"], "run_walltime")
    if walltime <= 0:
        raise ConfigError(f"{source}: run_walltime: expected a time > 0, got {doc['run_walltime']!r}")

    _installations(doc, source)
    plugins = []
    for i, p in enumerate(doc["plugins"]):
        path = Path(p) if Path(p).is_absolute() else (base or Path.cwd()) / p
        if not path.is_file():
            raise ConfigError(f"{source}: plugins[{i}]: no such file {p!r}")
        load_plugin(path)
        plugins.append(str(path.resolve()))

    experiments = []
    for name, e in doc["experiments"].items():
        if not e["enabled"]:
            continue
        where = f"experiments.{name}"
        params = dict(e["params"])
        if e.get("workload"):
            params.update(_workload_params(e, where, source, parsed))
        elif "sizes" not in e:
            raise ConfigError(f"{source}: {where}: 'sizes' is missing (required unless the "
                              f"experiment has a workload)")
        sizes = tuple(parsed(parse_size, s, f"{where}.sizes[{i}]")
                      for i, s in enumerate(e.get("sizes", ())))
        max_delays = tuple(parsed(parse_time, t, f"{where}.max_delays[{i}]")
                           for i, t in enumerate(e["max_delays"]))
        if e["late_rank"] >= min(e["procs"]) and any(d == "one-late" for d in e["delays"]):
            raise ConfigError(f"{source}: {where}.late_rank: {e['late_rank']} is not a rank of "
                              f"P={min(e['procs'])} (expected 0..{min(e['procs']) - 1})")
        if any(d != "none" for d in e["delays"]) and not any(t > 0 for t in max_delays):
            raise ConfigError(f"{source}: {where}.max_delays: delay modes "
                              f"{[d for d in e['delays'] if d != 'none']} need a max delay > 0")
        for i, p in enumerate(e["procs"]):
            if p < e["nodes"]:
                raise ConfigError(f"{source}: {where}.procs[{i}]: {p} processes cannot span "
                                  f"{e['nodes']} nodes")
            local = doc["launch"] != "srun" and not any(
                (doc["libraries"] or {}).get(lib) for lib in e["libraries"])
            if local and not e["oversubscribe"] and too_many_ranks(p):
                raise ConfigError(f"{source}: {where}.procs[{i}]: {p} ranks on this machine's "
                                  f"{os.cpu_count()} cores is more than {OVERSUBSCRIBE_FACTOR} "
                                  f"per core; set {where}.oversubscribe: true to run it anyway")
        experiments.append(Experiment(
            name=name, libraries=tuple(e["libraries"]), algorithms=tuple(e["algorithms"]),
            procs=tuple(e["procs"]), nodes=e["nodes"], sizes=sizes, dtypes=tuple(e["dtypes"]),
            ops=tuple(e["ops"]), delays=tuple(e["delays"]), max_delays=max_delays,
            late_rank=e["late_rank"], thread_level=e["thread_level"], timing=e["timing"],
            buffers=e["buffers"], params=tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                for k, v in params.items()))))
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
                  auto_ran=bool(doc["auto_ran"]["enabled"]))


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
            raise ConfigError(f"{source}: {where}: {lib!r} is neither a wheel ({', '.join(FAMILIES)}) "
                              f"nor declared under libraries; expected one of {', '.join(known)}")


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
