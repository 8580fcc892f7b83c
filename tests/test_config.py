"""Config checking and plan expansion: each mistake fails before any job, naming the key path."""

import copy
import re

import pytest
import yaml
from conftest import REPO, harness

from harness.campaign import config, plan

BASE = {
    "campaign": "t",
    "experiments": {
        "e": {"libraries": ["mpich"], "algorithms": ["native:auto"], "procs": [2],
              "sizes": ["4KiB"]},
    },
}


def with_change(path, value):
    doc = copy.deepcopy(BASE)
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


MISTAKES = [
    (("campaign",), "bad/name", "campaign"),
    (("campaign",), KeyError, "campaign"),
    (("colour",), "blue", "unknown key(s) 'colour'"),
    (("stopping", "precision"), 0, "stopping.precision"),
    (("stopping", "confidence"), 1.5, "stopping.confidence"),
    (("stopping", "min_reps"), 500, "stopping.min_reps"),
    (("stopping", "time_budget"), "soon", "stopping.time_budget"),
    (("stopping", "speed"), "fast", "stopping: unknown key(s) 'speed'"),
    (("run_walltime",), "-5min", "run_walltime"),
    (("experiments", "e", "libraries"), ["lam"], "experiments.e.libraries[0]: 'lam'"),
    (("experiments", "e", "procs"), [0], "experiments.e.procs[0]"),
    (("experiments", "e", "procs"), ["four"], "experiments.e.procs[0]"),
    (("experiments", "e", "sizes"), ["4KiB", "12 parsecs"], "experiments.e.sizes[1]"),
    (("experiments", "e", "sizes"), ["12B"], "experiments.e.sizes"),
    (("experiments", "e", "dtypes"), ["complex64"], "experiments.e.dtypes[0]"),
    (("experiments", "e", "ops"), ["xor"], "experiments.e.ops[0]"),
    (("experiments", "e", "delays"), ["sideways"], "experiments.e.delays[0]"),
    (("experiments", "e", "delays"), ["one-late"], "experiments.e.max_delays"),
    (("experiments", "e", "max_delays"), ["-1ms"], "experiments.e.max_delays[0]"),
    (("experiments", "e", "algorithms"), ["native:bogus"], "experiments.e.algorithms[0]: 'native:bogus'"),
    (("experiments", "e", "algorithms"), [], "experiments.e.algorithms"),
    (("experiments", "e", "sizes"), KeyError, "experiments.e: 'sizes' is missing"),
    (("experiments", "e", "nodes"), 3, "experiments.e.procs[0]"),
    (("experiments", "e", "colour"), 1, "experiments.e: unknown key(s) 'colour'"),
    (("libraries", "mpich", "partition"), "debug", "libraries.mpich: unknown key(s) 'partition'"),
    (("libraries", "mpich", "env"), {"BAD NAME": "1"}, "libraries.mpich.env"),
    (("experiments",), {}, "experiments"),
    (("stopping", "launches"), 0, "stopping.launches"),
    (("stopping", "rule"), "bootstrap", "stopping.rule"),
    (("stopping", "max_volume"), "lots", "stopping.max_volume"),
    (("stopping", "oversubscribed_time_budget"), "soon", "stopping.oversubscribed_time_budget"),
    (("confirm", "rounds"), 0, "confirm.rounds"),
    (("confirm", "time_budget"), 0, "confirm.time_budget"),
    (("confirm", "colour"), 1, "confirm: unknown key(s) 'colour'"),
    (("tune", "rounds"), 0, "tune.rounds"),
    (("tune", "procs"), [0], "tune.procs[0]"),
    (("tune", "enabled"), "yes", "tune.enabled"),
    (("experiments", "e", "thread_level"), "many", "experiments.e.thread_level"),
    (("experiments", "e", "timing"), "osu", "experiments.e.timing"),
]


@pytest.mark.parametrize("path,value,expected", MISTAKES)
def test_mistake_names_the_key_path(path, value, expected):
    doc = with_change(path, value)
    with pytest.raises(config.ConfigError, match=r"^cfg\.yaml: .*" + re.escape(expected)) as err:
        plan.expand(config.validate(doc, source="cfg.yaml"))
    msg = str(err.value)
    assert msg.startswith("cfg.yaml: ")
    assert expected in msg, msg
    assert "\n" not in msg


def test_one_late_rank_outside_p():
    doc = with_change(("experiments", "e", "delays"), ["one-late"])
    doc["experiments"]["e"].update(max_delays=["1ms"], late_rank=2)
    with pytest.raises(config.ConfigError, match=r"experiments.e.late_rank: 2 is not a rank of P=2"):
        config.validate(doc)


def test_defaults_come_from_the_schema():
    cfg = config.validate(copy.deepcopy(BASE))
    assert cfg.stopping["confidence"] == 0.95 and cfg.stopping["precision"] == 0.025
    assert cfg.launch == "local" and cfg.run_walltime == 1800
    (ex,) = cfg.experiments
    assert ex.dtypes == ("float64",) and ex.ops == ("sum",) and ex.delays == ("none",)
    assert ex.sizes == (4096,)


def test_plan_expands_globs_groups_runs_and_ids_are_stable():
    doc = copy.deepcopy(BASE)
    doc["experiments"]["e"].update(libraries=["openmpi"], algorithms=["native:*"], procs=[2, 3],
                                   sizes=["4KiB", "1MiB"], delays=["none", "one-late"],
                                   max_delays=["1ms", "5ms"])
    doc["experiments"]["f"] = {"libraries": ["openmpi"], "algorithms": ["native:auto"],
                               "procs": [2], "sizes": ["4KiB"]}
    runs, unlaunched = plan.partition(config.validate(doc))
    assert runs == plan.expand(config.validate(doc))
    n_alg = 7  # auto + 6 forced
    assert len(runs) == n_alg * 2
    # 2 sizes x (none + one-late x 2 max delays); experiment f's cell is already in e; the
    # segmented ring (algorithm 5) needs P x 64 KiB: its 4 KiB cells are in no run
    for r in runs:
        segmented = dict(r.env)["OMPI_MCA_coll_tuned_allreduce_algorithm"] == "5" if r.env else False
        assert len(r.cells) == (3 if segmented else 2 * 3)
    assert sorted((u.run.procs, len(u.run.cells)) for u in unlaunched) == [(2, 3), (3, 3)]
    assert {c.size for u in unlaunched for c in u.run.cells} == {4096}
    assert {u.run_id for u in unlaunched}.isdisjoint(r.run_id for r in runs)
    again = plan.expand(config.validate(copy.deepcopy(doc)))
    assert [r.run_id for r in runs] == [r.run_id for r in again]
    assert [c.cell_id for r in runs for c in r.cells] == [c.cell_id for r in again for c in r.cells]
    ring = [r for r in runs if dict(r.env).get("OMPI_MCA_coll_tuned_allreduce_algorithm") == "4"]
    assert len(ring) == 2 and {r.procs for r in ring} == {2, 3}


def test_shipped_config_is_valid_and_plan_prints_counts():
    out = harness("plan", "--runs")
    assert out.returncode == 0, out.stderr
    assert "auto-vs-best" in out.stdout and "runs" in out.stdout
    cfg = config.load(REPO / "config" / "experiments.yaml")
    assert {lib for ex in cfg.experiments for lib in ex.libraries} == {"mpich", "openmpi", "impi"}


def test_plan_reports_a_config_mistake_in_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(with_change(("experiments", "e", "sizes"), ["12 parsecs"])))
    out = harness("plan", "--config", bad)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "experiments.e.sizes[0]" in out.stderr and "12 parsecs" in out.stderr


def test_a_list_parameter_is_a_sweep_with_one_cell_per_combination():
    doc = copy.deepcopy(BASE)
    doc["experiments"]["e"].update(algorithms=["suara2"], procs=[6],
                                   params={"grid": ["1x6", "2x3", "3x2"], "row": ["ring", "linear"],
                                           "col": "ring"})
    cells = [c for r in plan.expand(config.validate(doc)) for c in r.cells]
    got = sorted((dict(c.params)["grid"], dict(c.params)["row"], dict(c.params)["col"])
                 for c in cells)
    assert got == sorted((g, r, "ring") for g in ("1x6", "2x3", "3x2") for r in ("ring", "linear"))
    assert len({c.cell_id for c in cells}) == 6


def test_a_nested_parameter_value_is_refused():
    doc = copy.deepcopy(BASE)
    doc["experiments"]["e"]["params"] = {"grid": {"rows": 2}}
    with pytest.raises(config.ConfigError, match=r"experiments\.e\.params\.grid"):
        config.validate(doc)


def test_a_local_launch_past_four_ranks_per_core_is_refused(tmp_path):
    import os

    big = 4 * (os.cpu_count() or 1) + 1
    doc = copy.deepcopy(BASE)
    doc["experiments"]["e"]["procs"] = [2, big]
    with pytest.raises(config.ConfigError, match=rf"experiments\.e\.procs\[1\]: {big} ranks on "
                       r"this machine's \d+ cores is more than 4 per core; set "
                       r"experiments\.e\.oversubscribe: true") as exc:
        config.validate(doc)
    msg = str(exc.value)
    assert f"experiments.e.procs[1]: {big} ranks" in msg and "oversubscribe: true" in msg
    doc["experiments"]["e"]["oversubscribe"] = True
    config.validate(doc)
    del doc["experiments"]["e"]["oversubscribe"]
    doc["launch"] = "srun"  # a cluster's launch is not limited by this machine's cores
    config.validate(doc)
