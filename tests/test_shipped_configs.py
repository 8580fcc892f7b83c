"""Every config shipped under config/ plans with Snakemake (`snakemake -n`, no MPI): the
config validates, the DAG builds, and it holds the stages that config is there to run, with
one `measure` job per run of its plan."""

import re
import subprocess

import pytest
from conftest import REPO
from test_workflow import SNAKEMAKE, env_for

COMMON = {"jobscript", "measure", "aggregate", "report_page", "all"}
# the rules each config must plan besides COMMON (a new config must be added here)
EXPECTED = {
    "experiments.yaml": {"report", "confirm", "report_confirm", "fit_params", "tune",
                         "verify_tuned", "report_tuned", "report_cross_library",
                         "report_node_aware", "report_pap", "report_pingpong",
                         "report_projection", "report_suara", "report_workload",
                         "report_castello_models", "report_guidelines", "sgd_jobscript",
                         "sgd_train", "report_sgd"},
    "dnn-full.yaml": {"report", "report_workload", "sgd_jobscript", "sgd_train", "report_sgd"},
    "paper-castello.yaml": {"report", "confirm", "report_confirm", "fit_params",
                            "report_cross_library", "report_pingpong", "report_castello_models"},
    "paper-nap.yaml": {"report", "report_cross_library", "report_node_aware",
                       "report_projection"},
    "paper-pap.yaml": {"report", "report_pap"},
    "paper-suara.yaml": {"report", "confirm", "report_confirm", "report_projection",
                         "report_suara"},
    "simulation-validation.yaml": {"report", "confirm", "report_confirm", "fit_params",
                                   "report_pingpong", "report_simulation", "report_bound"},
    "tuning-truth.yaml": {"report", "report_cross_library"},
    "tuning-truth-slurm.yaml": {"report", "report_cross_library"},
    "tuning-truth-sim.yaml": {"report", "report_cross_library"},
    "sim-suara.yaml": {"report", "report_projection", "report_suara"},
    "sim-castello.yaml": {"report", "report_cross_library"},
    "sim-nap.yaml": {"report", "report_node_aware", "report_projection"},
    "sim-pap.yaml": {"report", "report_pap"},
}
CONFIGS = sorted(p.name for p in (REPO / "config").glob("*.yaml"))
# a measured fit of this machine's probes (default campaign), for the platforms calibrated
# from a campaign (calibrate_from): planning reads it
CALIBRATION = REPO / "tests" / "data" / "simulated" / "default_model_params.json"


def calibrated_from(doc: dict, results) -> None:
    """The fit every platform of ``doc`` calibrates from, under ``results``."""
    import shutil

    for platform in (doc.get("platforms") or {}).values():
        if platform.get("calibrate_from"):
            where = results / platform["calibrate_from"]
            where.mkdir(parents=True, exist_ok=True)
            shutil.copy(CALIBRATION, where / "model_params.json")


def test_every_shipped_config_is_listed():
    assert CONFIGS == sorted(EXPECTED), "add the config's expected rules to EXPECTED"


def job_stats(log: str) -> dict[str, int]:
    """The "Job stats" table of a Snakemake dry run: rule -> number of jobs."""
    m = re.search(r"^Job stats:\n(.*?)^total\s+(\d+)", log, re.S | re.M)
    assert m, log[-3000:]
    rows = dict(re.findall(r"^([A-Za-z_]\w*)\s+(\d+)$", m.group(1), re.M))
    rows.pop("job", None)
    out = {k: int(v) for k, v in rows.items()}
    assert sum(out.values()) == int(m.group(2)), m.group(0)
    return out


def simulates(name: str) -> bool:
    """The config has a simulated platform (planning it needs SimGrid)."""
    import yaml

    return bool(yaml.safe_load((REPO / "config" / name).read_text()).get("platforms"))


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_config_plans(tmp_path, monkeypatch, name):
    from harness.simulate import loader

    if simulates(name) and loader.available():
        pytest.skip(f"{name} simulates, and SimGrid is missing: {loader.available()}")
    import yaml

    from harness.campaign.workflow import Campaign

    path = REPO / "config" / name
    calibrated_from(yaml.safe_load(path.read_text()), tmp_path / "results")
    before = sorted((tmp_path / "results").rglob("*"))
    out = subprocess.run(
        SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path / "work"),
                     "--configfile", str(path), "-n"],
        env=env_for(tmp_path), capture_output=True, text=True, timeout=900, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = job_stats(out.stdout + out.stderr)
    missing = (COMMON | EXPECTED[name]) - set(jobs)
    assert not missing, f"{name}: the dry run plans no {sorted(missing)}: {jobs}"
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "plan"))
    calibrated_from(yaml.safe_load(path.read_text()), tmp_path / "plan")
    campaign = Campaign(yaml.safe_load(path.read_text()), source=str(path))
    assert jobs["measure"] == jobs["jobscript"] == len(campaign.runs) > 0
    assert sorted((tmp_path / "results").rglob("*")) == before  # a dry run writes nothing
