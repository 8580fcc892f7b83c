"""`harness run --campaign <c> --cell <id>`: one cell of a campaign measured again with the
campaign's own settings; its row is replaced, and the next `snakemake` rebuilds only the
aggregate and the report."""

import json

from test_faults import SMALL, check_ok, config, harness_cmd, store
from test_workflow import snakemake, summary


def test_rerun_one_cell_by_id_round_trip(tmp_path):
    cfg = config(tmp_path, SMALL, stopping={"min_reps": 3, "max_reps": 7, "precision": 0.5,
                                            "warmup": 2, "time_budget": "20s"})
    assert snakemake(tmp_path, cfg).returncode == 0
    before = summary(tmp_path).set_index("cell_id")
    target, other = sorted(before.index)
    out = harness_cmd(tmp_path, "run", "--campaign", "wf", "--cell", target, "--configfile",
                      str(cfg))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "replaced in run(s)" in out.stdout
    # the campaign's settings, not `harness run`'s defaults (warm-up 3, max_reps 1000)
    spec = json.loads(next((store(tmp_path) / "rerun" / "jobs").glob("*.json")).read_text())
    assert spec["settings"]["warmup"] == 2 and spec["settings"]["max_reps"] == 7
    assert [c["cell_id"] for c in spec["cells"]] == [target]
    again = snakemake(tmp_path, cfg)
    log = again.stdout + again.stderr
    assert again.returncode == 0, log[-3000:]
    assert "rule aggregate" in log and "rule report" in log
    assert "rule measure" not in log and "rule jobscript" not in log
    after = summary(tmp_path).set_index("cell_id")
    assert after.loc[target, "finished"] != before.loc[target, "finished"]
    assert after.loc[other, "finished"] == before.loc[other, "finished"]
    assert after.loc[target, "run_id"] == before.loc[target, "run_id"]
    check_ok(tmp_path, cfg)


def test_unknown_cell_id_names_the_closest(tmp_path):
    cfg = config(tmp_path, SMALL)
    (tmp_path / "results" / "wf").mkdir(parents=True)
    out = harness_cmd(tmp_path, "run", "--campaign", "wf", "--cell", "c0000", "--configfile",
                      str(cfg))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--cell" in lines[0] and "closest: c" in lines[0], out.stderr
    assert not list((tmp_path / "results" / "wf").iterdir())
