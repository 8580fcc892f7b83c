"""A simulated platform as part of a campaign (docs/simulation.md): the config's platforms,
the plan's simulated cells and runs, the simulation written as a run, and a campaign of the
harness's ring and recursive doubling and Open MPI's selector at P = 64 end to end through
Snakemake."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.campaign import plan
from harness.campaign.config import validate
from harness.campaign.workflow import Campaign, simulation_memory_mb
from harness.errors import ConfigError
from harness.simulate import loader
from test_workflow import env_for

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")

needs_simgrid = pytest.mark.skipif(loader.available() is not None,
                                   reason=f"SimGrid: {loader.available()}")


def config(**experiment) -> dict:
    return {
        "campaign": "sim",
        "stopping": {"min_reps": 4, "time_budget": "1s"},
        "platforms": {"flat64": {"kind": "simulated", "nodes": 64, "latency": "1us",
                                 "bandwidth": "12.5GB/s", "reduce_rate": "5GB/s"},
                      "two": {"kind": "simulated", "nodes": 4, "cores_per_node": 2}},
        "experiments": {"sim": {"platform": "flat64", "libraries": ["openmpi"],
                                "algorithms": ["native:auto", "ring", "recursive_doubling"],
                                "procs": [64], "sizes": ["4KiB", "64KiB", "1MiB"],
                                **experiment}},
    }


@pytest.mark.parametrize("change, where, said", [
    ({"platform": "nowhere"}, "experiments.sim.platform", "'nowhere' is not declared under platforms"),
    ({"procs": [65]}, "experiments.sim.procs[0]", "65 ranks do not fit on platform flat64"),
    ({"libraries": ["ompi41"]}, "experiments.sim.libraries[0]", "not declared under libraries"),
    ({"algorithms": ["pingpong"]}, "experiments.sim.algorithms[0]", "'pingpong' is not simulated"),
    ({"timing": "imb"}, "experiments.sim.timing", "a simulated call is timed exactly"),
    ({"buffers": "rotate"}, "experiments.sim.buffers", "has no caches"),
])
@needs_simgrid
def test_a_simulated_experiment_that_cannot_be_honoured_is_refused_naming_the_key(
        change, where, said, results_root):
    doc = config(**change)
    with pytest.raises(ConfigError, match="sim") as err:
        plan.partition(validate(doc, source="c.yaml"))
    assert f"c.yaml: {where}: " in str(err.value) and said in str(err.value)


@needs_simgrid
def test_platform_values_are_checked_with_units(results_root):
    doc = config()
    doc["platforms"]["flat64"]["bandwidth"] = "fast"
    with pytest.raises(ConfigError, match=r"c.yaml: platforms.flat64.bandwidth: expected a rate"):
        validate(doc, source="c.yaml")
    doc["platforms"]["flat64"]["bandwidth"] = "100Gbit/s"
    cfg = validate(doc, source="c.yaml")
    assert cfg.platforms["flat64"].platform["bandwidth"] == 12.5e9


def test_without_simgrid_a_simulated_experiment_gets_one_line(results_root, monkeypatch):
    monkeypatch.setattr(loader, "available", lambda: "no SimGrid here: install it (docs)")
    with pytest.raises(ConfigError, match="simulating needs SimGrid") as err:
        validate(config(), source="c.yaml")
    text = str(err.value)
    assert "\n" not in text
    assert text == ("c.yaml: experiments.sim.platform: simulating needs SimGrid, which is "
                    "missing: no SimGrid here: install it (docs)")


@needs_simgrid
def test_simulated_cells_are_their_own_installation_platform_and_run(results_root):
    doc = config(algorithms=["native:*", "ring"], procs=[6], libraries=["openmpi", "mpich"])
    doc["experiments"]["measured"] = {"libraries": ["openmpi"], "algorithms": ["ring"],
                                      "procs": [2], "sizes": ["4KiB"]}
    doc["experiments"]["sim"]["platform"] = "two"
    cfg = validate(doc, source="c.yaml")
    runs, unlaunched = plan.partition(cfg)
    simulated = [r for r in runs if r.platform]
    assert sorted(r.library for r in simulated) == ["mpich@two", "openmpi@two"]
    run = simulated[0]
    pid = cfg.platforms["two"].platform_id
    assert run.platform == pid and run.nodes == 3 and run.env == ()
    assert {c.platform for c in run.cells} == {pid} and {c.nodes for c in run.cells} == {3}
    measured = [r for r in runs if not r.platform]
    assert measured and all(c.platform == "" for r in measured for c in r.cells)
    # a measured cell keeps the id it always had: the platform is in no measured cell's key
    assert all("platform" not in c.key() for r in measured for c in r.cells)
    # forced algorithms SMPI has no copy of: not applicable, with the reason, never simulated
    reasons = {(n.run.library, c.algorithm): n.reasons[c.cell_id]
               for n in unlaunched for c in n.run.cells}
    assert reasons[("mpich@two", "native:tree")].startswith(
        "not applicable on a simulated platform: mpich native:tree cannot be simulated by SMPI")
    assert ("mpich@two", "native:ring") not in reasons
    # and, as measured, outside the catalogue's condition: Open MPI's segmented ring needs
    # P x 64 KiB; SMPI's copy would run the library's other algorithm under its name
    assert reasons[("openmpi@two", "native:segmented_ring")].startswith(
        "not applicable: the catalogue requires")
    campaign = Campaign(doc, source="c.yaml")
    assert campaign.memory_mb(run) == simulation_memory_mb(6, 1 << 20)
    assert all(campaign.memory_mb(r) == 0 for r in measured)
    assert campaign.tune_libraries() == [] or "openmpi@two" not in campaign.tune_libraries()
    assert "openmpi@two" not in campaign.installations()


def test_memory_grows_with_ranks_and_size():
    assert simulation_memory_mb(64, 1 << 20) < simulation_memory_mb(256, 1 << 20)
    assert simulation_memory_mb(64, 1 << 10) < simulation_memory_mb(64, 1 << 22)


@needs_simgrid
def test_a_campaign_simulated_at_p64_end_to_end_through_snakemake(tmp_path):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(yaml.safe_dump(config()))
    env = env_for(tmp_path)
    proc = subprocess.run([SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory",
                           str(tmp_path / "work"), "--configfile", str(cfg), "-c2"],
                          capture_output=True, text=True, timeout=900, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store = tmp_path / "results" / "sim"
    d = pd.read_csv(store / "summary.csv")
    assert len(d) == 9 and set(d["status"]) == {"ok"}
    assert d["simulated"].astype(bool).all()
    assert set(d["library"]) == {"openmpi@flat64"}
    assert d["platform"].nunique() == 1 and len(str(d["platform"].iloc[0])) == 12
    assert set(d["simulator"]) == {f"SimGrid {loader.version()}"}
    auto = d[d["algorithm"] == "native:auto"]
    assert auto["copies"].str.contains("Open MPI").all()
    assert d[d["algorithm"] == "ring"]["copies"].str.contains("harness's ring").all()
    # verified like a measured cell: the record says so, each rank's messages counted
    ring = d[(d["algorithm"] == "ring") & (d["size"] == 1 << 20)].iloc[0]
    record = json.loads(ring["record"])
    assert record["verified"] is True
    assert record["simulation"]["sizes"] == [4096, 65536, 1 << 20]  # simulated together
    assert record["simulation"]["messages"] == [3 * 2 * 63] * 64
    # exact: one call, an interval of no width
    assert (d["n"] == 1).all() and (d["ci_low"] == d["mean"]).all()
    assert (d["ci_method"] == "simulated").all()
    # the ring at P = 64 is latency-bound at 4 KiB: far slower than recursive doubling there
    small = d[d["size"] == 4096].set_index("algorithm")["mean"]
    assert small["ring"] > 5 * small["recursive_doubling"]
    assert json.loads((store / "check.json").read_text())["ok"] is True
    (xml,) = (store / "platforms").glob("platform-*.xml")  # the platform file, kept
    assert "64 nodes x 1 cores" in xml.read_text()
    table = (store / "tables" / "auto_vs_best.md").read_text()
    assert "openmpi@flat64 (simulated Open MPI" in table
    page = (store / "report" / "index.html").read_text()
    assert "<th>simulated on</th><td>flat64 (" in page and "Some numbers are simulated" in page
    # `harness run --cell` simulates one cell of the campaign again and puts it in place
    cell = ring["cell_id"]
    again = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--config", str(cfg),
                            "--campaign", "sim", "--cell", cell], capture_output=True,
                           text=True, timeout=600, env=env, cwd=REPO)
    assert again.returncode == 0, again.stderr[-3000:]
    rerun = json.loads(next((store / "rerun" / "runs").glob("*.json")).read_text())
    assert rerun["provenance"]["simulated"] is True
    (entry,) = [c for c in json.loads((store / "runs" / f"{ring['run_id']}.json").read_text())[
        "cells"] if c["cell_id"] == cell]
    assert entry["rerun_of"] and entry["stats"]["mean"] == pytest.approx(ring["mean"])


@needs_simgrid
def test_a_wrong_simulated_result_is_recorded_wrong_never_timed(results_root):
    """A native cell whose SMPI result is spoilt (HARNESS_SMPI_BREAK_RANK) is `wrong` with the
    rank named, and carries no time; the harness's cells beside it are verified and ok."""
    campaign = Campaign(config(procs=[8], sizes=["4KiB"]), source="c.yaml")
    (run_id,) = campaign.runs
    campaign.render(run_id)
    spec = campaign.store.job_spec(run_id)
    env = {**env_for(results_root.parent), "HARNESS_RESULTS": str(results_root),
           "HARNESS_SMPI_BREAK_RANK": "5"}
    proc = subprocess.run([sys.executable, "-m", "harness.simulate.bench", str(spec)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(campaign.store.run_doc(run_id).read_text())
    status = {c["cell"]["algorithm"]: c for c in doc["cells"]}
    assert status["native:auto"]["status"] == "wrong"
    assert "ranks [5]" in status["native:auto"]["error"]
    assert not status["native:auto"]["stats"].get("mean")
    assert status["ring"]["status"] == "ok" and status["ring"]["record"]["verified"] is True


@needs_simgrid
def test_delayed_cells_are_simulated_in_rounds_and_timed_from_each_arrival(results_root):
    """One-late: every repetition the same, exact after the first round; rand-late: each
    repetition its own draw (the cell's seed), rounds until the precision holds. A rank's time
    runs from its own arrival, as a measured cell's: the early ranks wait for the late one."""
    doc = config(algorithms=["ring"], procs=[8], sizes=["4KiB"], delays=["one-late", "rand-late"],
                 max_delays=["1ms"], late_rank=3)
    doc["stopping"]["precision"] = 0.05
    campaign = Campaign(doc, source="c.yaml")
    (run_id,) = campaign.runs
    campaign.render(run_id)
    env = {**env_for(results_root.parent), "HARNESS_RESULTS": str(results_root)}
    proc = subprocess.run([sys.executable, "-m", "harness.simulate.bench",
                           str(campaign.store.job_spec(run_id))],
                          capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cells = {c["cell"]["delay"]: c for c in
             json.loads(campaign.store.run_doc(run_id).read_text())["cells"]}
    late = cells["one-late"]
    assert late["status"] == "ok" and late["stats"]["n"] == 4  # min_reps: one round
    mx = late["all_stats"]["max"]["mean"]
    assert 1e-3 < mx < 1.5e-3  # an early rank waits out the late one's millisecond
    assert late["all_stats"]["min"]["mean"] < 1e-3  # the late rank's own call is short
    rand = cells["rand-late"]
    assert rand["stats"]["n"] >= 4 and rand["stats"]["std"] > 0
    assert rand["status"] == ("ok" if rand["stats"]["rel_halfwidth"] <= 0.05 else "not-converged")
    raw = pd.read_parquet(campaign.store.raw(run_id))
    row = raw[raw["cell_id"] == late["cell_id"]].iloc[0]
    assert list(row["arrival"]) == [0, 0, 0, 1e-3, 0, 0, 0, 0]
    from harness.results.check import check_store
    from harness.results.store import rebuild_summary

    rebuild_summary(campaign.store)
    report = check_store(campaign.store)
    assert report.ok, report.problems


def test_a_platform_name_says_what_a_name_may_hold(results_root):
    doc = config()
    doc["platforms"]["Bad-Name"] = doc["platforms"].pop("two")
    with pytest.raises(ConfigError, match=r"c.yaml: platforms: 'Bad-Name' is not a valid name "
                                          r"\(a lower-case letter, then lower-case letters, "
                                          r"digits and '_'\)"):
        validate(doc, source="c.yaml")
