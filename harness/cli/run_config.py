"""``harness run``'s options as a campaign config of one experiment, so that one cell is
checked and planned as any campaign's (``harness.campaign.workflow.Campaign``:
``config.validate``, then ``plan.partition``), and an error of that config in the words of
the option it came from: ``experiments.run.procs[0]: 0 is less than the minimum of 1``
becomes ``argument --procs: 0 is less than the minimum of 1``.

``KEYS`` is the one table of which option sets which config key."""

from __future__ import annotations

import re

from ..algorithms import p2p_bench
from ..campaign import config
from ..dnn import workload

EXPERIMENT = "run"  # the name of the one experiment
WHERE = f"experiments.{EXPERIMENT}"
SOURCE = "harness run"  # the config's source, which its errors begin with

# option -> the config key it sets; "[]": the config takes a list of one value
KEYS = {
    "--campaign": "campaign",
    "--seed": "seed",
    "--timeout": "run_walltime",
    "--plugin": "plugins",
    "--library": f"{WHERE}.libraries[]",
    "--algorithm": f"{WHERE}.algorithms[]",
    "--procs": f"{WHERE}.procs[]",
    "--oversubscribe": f"{WHERE}.oversubscribe",
    "--size": f"{WHERE}.sizes[]",
    "--dtype": f"{WHERE}.dtypes[]",
    "--op": f"{WHERE}.ops[]",
    "--delay": f"{WHERE}.delays[]",
    "--max-delay": f"{WHERE}.max_delays[]",
    "--late-rank": f"{WHERE}.late_rank",
    "--thread-level": f"{WHERE}.thread_level",
    "--timing": f"{WHERE}.timing",
    "--buffers": f"{WHERE}.buffers",
    "--param": f"{WHERE}.params",  # with a workload, also f"{WHERE}.workload" (``split_params``)
    "--rule": "stopping.rule",
    "--confidence": "stopping.confidence",
    "--precision": "stopping.precision",
    "--min-reps": "stopping.min_reps",
    "--max-reps": "stopping.max_reps",
    "--time-budget": "stopping.time_budget",
    "--max-volume": "stopping.max_volume",
    "--imb-iterations": "stopping.imb_iterations",
    "--warmup": "stopping.warmup",
    "--launches": "stopping.launches",
    "--metric": "stopping.metric",
    "--sync": "stopping.sync",
    "--base-compute": "stopping.base_compute",
}
FLAGS = {key.removesuffix("[]"): flag for flag, key in KEYS.items()}
FLAGS[f"{WHERE}.workload"] = "--param"
# a workload's keys in the config and the cell parameters they are on the command line
WORKLOAD_PARAMS = {"models": workload.KEY, "fusion": "fusion", "precision": "precision",
                   "batch": "batch", "compute": "iteration_compute"}


def dest(flag: str) -> str:
    """The attribute argparse gives option ``flag``."""
    return flag.lstrip("-").replace("-", "_")


def choices(key: str) -> tuple:
    """The values the schema allows for ``key`` (as in ``KEYS``): one list, read in one place."""
    schema = config.schema()
    section, _, name = key.removesuffix("[]").rpartition(".")
    props = (schema["definitions"]["experiment"]["properties"] if section == WHERE
             else schema["properties"][section]["properties"])[name]
    return tuple(props.get("items", props)["enum"])


def metavar(key: str) -> str:
    return "{" + ",".join(choices(key)) + "}"


def parse_params(items) -> dict:
    """``--param KEY=VALUE`` items as a dict; a value of digits is an integer. ValueError
    naming an item without ``=``."""
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        params[key] = int(value) if value.isdigit() else value
    return params


def split_params(items) -> tuple[dict, dict]:
    """``--param`` items as (params, workload block): with ``workload=<model>``, the
    workload's own keys form the experiment's ``workload:`` block, as in a config."""
    params = parse_params(items)
    if not workload.is_workload(params):
        return params, {}
    block = {}
    for name, key in WORKLOAD_PARAMS.items():
        if key in params:
            value = params.pop(key)
            block[name] = [value] if name in ("models", "fusion", "precision") else value
    return params, block


def document(args, declared: dict, launch: str) -> dict:
    """The config of one experiment that the options ``args`` ask for. ``declared``: the
    installations declared in ``--config`` (its ``libraries:``), ``launch`` its launch."""
    doc: dict = {"libraries": declared, "launch": launch}
    for flag, key in KEYS.items():
        value = getattr(args, dest(flag))
        if key.endswith("[]"):
            key, value = key[:-2], [value]
        *parents, name = key.split(".")
        here = doc
        for part in parents:
            here = here.setdefault(part, {})
        here[name] = value
    experiment = doc["experiments"][EXPERIMENT]
    experiment["params"], block = split_params(args.param)
    if block:  # a training iteration: its size comes from the trace
        experiment["workload"] = block
        del experiment["sizes"]
    return doc


def translate(message: str, args) -> str:
    """A ConfigError of the config ``document`` made, as a one-line error of the options:
    the key path replaced by the option, key paths inside the message too."""
    text = message.removeprefix(f"{SOURCE}: ")
    path, _, detail = text.partition(": ")
    known, rest = _key(re.sub(r"\[\d+\]", "", path))
    if known is None and path == WHERE:  # the plan names the key first: "buffers: ..."
        word = detail.split(":")[0].split()[0]
        known, rest = _key(f"{WHERE}.params" if word == "parameter" else f"{WHERE}.{word}")
        rest = ""
    if known is None:  # a declaration of --config, or nothing an option sets
        return f"argument --config: {args.configfile}: {text}" if args.configfile else text
    detail = _in_option_words(detail, args.configfile)
    if rest and known == f"{WHERE}.workload":
        detail = _param_words(WORKLOAD_PARAMS.get(rest.split(".")[0], workload.KEY), detail, args)
    elif rest and known == f"{WHERE}.params":
        detail = _param_words(rest.split(".")[0], detail, args)
    return f"argument {FLAGS[known]}: {detail}"


def _key(key: str) -> tuple[str | None, str]:
    """The key of ``FLAGS`` that ``key`` is, or begins with (the longest), and the rest;
    a singular names its list (``delay``: ``delays``)."""
    for known in sorted(FLAGS, key=len, reverse=True):
        if key == known or key.startswith(known + "."):
            return known, key[len(known) + 1:]
        if key == known.removesuffix("s"):
            return known, ""
    return None, ""


def _in_option_words(detail: str, configfile) -> str:
    """Key paths inside a message as options (``stopping.max_reps`` is ``--max-reps``)."""
    def option(match):
        known, _ = _key(match[1])
        return match[0] if known is None else FLAGS[known]

    detail = re.sub(r"set (\S+): true", lambda m: f"add {option(m)}", detail)
    detail = re.sub(r"\b((?:experiments\.\w+|stopping)\.\w+)(\[\d+\])?", option, detail)
    return detail.replace("is not declared under libraries",
                          f"is not declared in {configfile}" if configfile
                          else "is not declared (no --config given)")


def _param_words(name: str, detail: str, args) -> str:
    """An error of the parameter ``name`` of ``--param``, in the words of the code that takes
    it (``parameter pairs: expected an integer >= 1 (...)``) when it has its own."""
    try:
        params = parse_params(args.param)
    except ValueError:
        params = {}
    checks = (lambda: workload.is_workload(params) and workload.check(params),
              lambda: p2p_bench.check(args.algorithm, params))
    for check in checks:
        try:
            check()
        except ValueError as exc:
            if str(exc).startswith(f"parameter {name}:"):
                return str(exc)
    return f"parameter {name}: {detail}"
