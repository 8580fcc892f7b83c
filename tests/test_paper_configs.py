"""The paper-scale configs (config/paper-*.yaml, docs/paper_configs.md).

1. Each plans: `harness plan` accepts it and every experiment expands to cells and runs; each
   file quotes the paper it reproduces (its figures or tables).
2. Each, cut down by harness.campaign.cutdown to P <= 4 on at most 2 nodes (every experiment kept),
   runs with `snakemake --profile slurm` on the local two-node Slurm of .ci/slurm (all four
   as one campaign, tests/slurm_support.py, shared with tests/test_slurm.py): every
   experiment's cells are in summary.csv, measured (ok / not-converged), and every report
   rule's outputs are built. Opt-in like tests/test_slurm.py (HARNESS_SLURM_TESTS=1).
"""

import re
import subprocess

import pytest
import slurm_support
import yaml
from conftest import FAST_STOP, HARNESS, REPO

from harness.campaign.cutdown import cut_down

CONFIGS = sorted((REPO / "config").glob("paper-*.yaml"))
IDS = [p.stem for p in CONFIGS]
PLAN_ROW = re.compile(r"^  (\S+)\s+(\d+) cells\s+(\d+) runs", re.M)


def plan(path):
    out = subprocess.run(HARNESS + ["plan", "--config", str(path)], capture_output=True,
                         text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {name: (int(c), int(r)) for name, c, r in PLAN_ROW.findall(out.stdout)}
    return rows, out.stdout


def test_the_paper_configs_are_there():
    names = {p.name for p in CONFIGS}
    assert {"paper-castello.yaml", "paper-pap.yaml"} <= names, names


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_paper_config_plans_every_experiment(path):
    doc = yaml.safe_load(path.read_text())
    rows, text = plan(path)
    enabled = [n for n, ex in doc["experiments"].items() if ex.get("enabled", True)]
    assert enabled, f"{path.name}: no enabled experiment"
    for name in enabled:
        assert name in rows, f"{path.name}: experiment {name} missing from the plan:\n{text}"
        cells, runs = rows[name]
        assert cells > 0 and runs > 0, f"{path.name}: {name}: {cells} cells, {runs} runs"
    total_cells, total_runs = rows["total"]
    assert total_cells >= max(rows[n][0] for n in enabled) and total_runs > 0
    # the file says what it reproduces and quotes the paper's numbers
    raw = path.read_text()
    assert re.search(r"\b(Fig\.|Table)\s*\d", raw), f"{path.name}: no figure or table cited"
    assert "snakemake --profile slurm" in raw, f"{path.name}: no run command in the comments"


def test_paper_scale():
    """The two configs reproduce the papers' own P, node counts, sizes and delays."""
    from harness.campaign.config import load
    from harness.campaign.plan import expand

    cfg = load(REPO / "config" / "paper-castello.yaml")
    cells = [c for r in expand(cfg) for c in r.cells]
    allreduce = [c for c in cells if c.algorithm.startswith("native:")]
    assert {(c.procs, c.nodes) for c in allreduce} == {(7, 7), (8, 8)}
    assert {c.library for c in allreduce} == {"mpich", "openmpi", "impi"}
    assert {c.dtype for c in allreduce} == {"float32"}
    assert min(c.size for c in allreduce) == 1024 and max(c.size for c in allreduce) == 2**30
    assert "native:auto" in {c.algorithm for c in allreduce}
    pp = {(c.procs, dict(c.params).get("pairs")) for c in cells if c.algorithm == "pingpong"}
    assert {(2, 1), (8, 4)} <= pp
    assert any(c.algorithm == "reduce_local" for c in cells)

    cfg = load(REPO / "config" / "paper-pap.yaml")
    cells = [c for r in expand(cfg) for c in r.cells]
    assert {c.procs for c in cells} == {4, 6, 8, 10, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48}
    assert all(c.nodes == c.procs for c in cells)  # one process per node
    assert {c.algorithm for c in cells} == {"ring", "rabenseifner", "slt", "prr"}
    assert {c.delay for c in cells} == {"none", "one-late", "rand-late"}
    assert {round(c.max_delay * 1000) for c in cells} == {0, 1, 5, 10, 50, 100, 500, 1000}
    assert {c.size // 4 // 1024 for c in cells} == {128, 512, 1024, 2048, 4096, 8192}  # K floats
    assert {dict(c.params)["compute"] for c in cells} == {"100ms"}
    assert {dict(c.params).get("knowledge") for c in cells} == {None, "online"}


def test_cut_down_keeps_every_experiment_within_two_nodes(tmp_path):
    """The cut-down of each paper config plans, keeps every experiment, and stays within
    P <= 4, 2 nodes, 2 sizes, one small max delay (no Slurm needed)."""
    from harness.campaign.config import load
    from harness.campaign.plan import expand

    for path in CONFIGS:
        doc = yaml.safe_load(path.read_text())
        tiny = cut_down(doc, stopping=FAST_STOP)
        assert list(tiny["experiments"]) == list(doc["experiments"])
        out = tmp_path / path.name
        out.write_text(yaml.safe_dump(tiny))
        rows, text = plan(out)
        for name, ex in tiny["experiments"].items():
            if ex.get("enabled", True):
                assert rows.get(name, (0, 0))[0] > 0, f"{path.name}: {name}\n{text}"
        cells = [c for r in expand(load(out)) for c in r.cells]
        assert max(c.procs for c in cells) <= 4 and max(c.nodes for c in cells) <= 2
        assert max(c.max_delay for c in cells) <= 0.1  # each experiment's smallest
        assert all(dict(c.params).get("compute") in (None, "5ms") for c in cells)
        assert tiny["confirm"] == {"enabled": False} and tiny["tune"] == {"enabled": False}


def test_cut_down_fits_grids_pairs_and_ppn():
    doc = {"campaign": "x", "experiments": {
        "grid": {"libraries": ["openmpi"], "algorithms": ["suara2"], "procs": [12, 16],
                 "nodes": 12, "sizes": ["1MiB"], "params": {"grid": ["4x3", "6x2", "best-grid"]}},
        "pp": {"libraries": ["openmpi"], "algorithms": ["pingpong"], "procs": [8], "nodes": 8,
               "sizes": ["4B"], "params": {"pairs": [1, 4]}},
        "nap": {"libraries": ["openmpi"], "algorithms": ["nap"], "procs": [3, 6, 8],
                "sizes": ["8B", "64B", "1KiB"], "params": {"layout": "emulated", "ppn": [4, 8]}}}}
    ex = cut_down(doc)["experiments"]
    assert ex["grid"]["procs"] == [4] and ex["grid"]["nodes"] == 2
    assert ex["grid"]["params"]["grid"] == ["best-grid", "2x2", "1x4", "4x1"]
    assert ex["pp"]["params"]["pairs"] == [1] and ex["pp"]["procs"] == [2]
    assert ex["nap"]["procs"] == [4] and ex["nap"]["params"]["ppn"] == [4]
    assert ex["nap"]["sizes"] == ["8B", "64B"]
    # ping-pong: the smallest size and the largest up to 1 MiB (alpha and beta fitted apart)
    doc = {"campaign": "z", "experiments": {"pp": {
        "libraries": ["mpich"], "algorithms": ["pingpong"], "procs": [2], "nodes": 2,
        "sizes": ["64B", "4B", "1KiB", "1MiB", "4MiB", "1GiB"]}}}
    assert cut_down(doc)["experiments"]["pp"]["sizes"] == ["4B", "1MiB"]
    assert cut_down(doc, max_sizes=3)["experiments"]["pp"]["sizes"] == ["4B", "64B", "1MiB"]
    # native:* becomes AUTO and one forced algorithm every library has: one launch each
    doc = {"campaign": "y", "experiments": {"all": {
        "libraries": ["mpich", "openmpi", "impi"], "algorithms": ["native:*", "ring"],
        "procs": [8], "nodes": 8, "sizes": ["1KiB", "1GiB", "4B"]}}}
    ex = cut_down(doc)["experiments"]["all"]
    assert ex["algorithms"] == ["native:auto", "native:ring", "ring"]
    assert ex["procs"] == [2] and ex["nodes"] == 2 and ex["sizes"] == ["4B", "1KiB"]


@pytest.fixture(scope="module")
def paper_campaign(local_slurm_cluster, tmp_path_factory):
    return slurm_support.paper_campaign(tmp_path_factory)


def test_merged_cut_down_keeps_every_experiment_of_every_paper_config():
    tiny = slurm_support.merged_cut_down()
    want = {f"{p.stem}.{n}" for p in CONFIGS for n in yaml.safe_load(p.read_text())["experiments"]}
    assert set(tiny["experiments"]) == want and {n.split(".")[0] for n in want} == set(IDS)


@pytest.mark.xdist_group("slurm")
@pytest.mark.timeout(slurm_support.CAMPAIGN_TIMEOUT + 300)
def test_cut_down_paper_configs_run_on_slurm(paper_campaign):
    from harness.campaign.config import load
    from harness.campaign.plan import expand
    from harness.campaign.runner import START_RETRIES
    from harness.report.registry import REPORTS

    camp = paper_campaign
    camp.assert_ran()  # every rule, the report's too, ended well
    df = camp.summary()
    bad = df[~df.status.isin(["ok", "not-converged"])]
    assert bad.empty, "\n".join(f"{r.algorithm} P={r.procs} {r.size} {r.status}: {r.error}"
                                for r in bad.itertuples())
    measured = set(df.cell_id)
    cfg_obj = load(camp.config_path)
    assert {ex.name for ex in cfg_obj.experiments} == set(camp.config["experiments"])
    for ex in cfg_obj.experiments:  # every experiment's cells are in the summary
        sub = type(cfg_obj)(**{**cfg_obj.__dict__, "experiments": (ex,)})
        want = {c.cell_id for r in expand(sub) for c in r.cells}
        assert want and want <= measured, f"{ex.name}: {len(want - measured)} cells missing " \
                                          f"from summary.csv"
    # a launch that died in MPI's start-up was launched again by the runner, and said so
    slurm_support.assert_start_attempts(camp.run_docs(), camp.results / "logs", START_RETRIES)
    # every launch, on one node or two, put its skewed ranks on rank 0's clock
    slurm_support.assert_clocks_synchronised(camp.run_docs())

    # every report rule the paper configs trigger ran (workflow/rules/report.smk, params.smk)
    tables, figures = camp.results / "tables", camp.figures
    assert (camp.results / "check.json").is_file()
    native = sorted(set(df[df.algorithm.str.startswith("native:")].library))
    assert native == ["impi", "mpich", "openmpi"], native  # castello-p7/p8: native:* of each
    outputs = [tables / "auto_vs_best.md"] + [figures / f"auto_vs_best_{lib}.png" for lib in native]
    assert df.params.astype(str).str.contains("compute").any()  # pap-*
    outputs += [tables / f"pap_table{n}.md" for n in (3, 4)]
    outputs += [figures / f"pap_fig{n}.png" for n in (10, 11, 12)]
    assert {"pingpong", "reduce_local"} <= set(df.algorithm)  # castello-pingpong, -gamma
    outputs += [tables / "pingpong.md", figures / "pingpong_fig4.png",
                camp.results / "model_params.json"]
    outputs += [tables / f"{n}.md" for n in REPORTS["castello_models"].tables]
    outputs += [figures / f"{n}.png" for n in REPORTS["castello_models"].figures]
    assert {"nap", "smp"} <= set(df.algorithm)  # paper-nap
    outputs += [tables / "node_aware_counts.md", figures / "node_aware_vs_size.png"]
    assert {"suara2", "three_step"} <= set(df.algorithm)  # paper-suara
    outputs += [tables / f"{n}.md" for n in REPORTS["suara"].tables]
    outputs += [figures / f"{n}.png" for n in REPORTS["suara"].figures]
    outputs += [tables / "cross_library.md", figures / "cross_library.png",
                tables / "projection.md", camp.results / "report" / "index.html"]
    missing = [str(p) for p in outputs if not p.is_file() or p.stat().st_size == 0]
    assert not missing, missing
