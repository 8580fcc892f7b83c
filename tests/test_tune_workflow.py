"""The tuned-selection stage in the workflow: `tune.enabled` makes the campaign write each
library's tuning files, verify AUTO against `native:tuned` in fresh interleaved launches at
the measured and held-out sizes, and report it; `harness run --algorithm native:tuned`
measures one cell with a campaign's tuning."""

import json

import pandas as pd

from conftest import HARNESS, REPO  # noqa: F401
from test_workflow import env_for, snakemake, write_config


def test_campaign_tunes_verifies_and_reports(tmp_path):
    cfg = write_config(tmp_path, {
        "n": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring",
                                                     "native:recursive_doubling"],
              "procs": [2], "sizes": ["8B", "64KiB"]}},
        confirm={"enabled": False}, tune={"enabled": True, "rounds": 1})
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-4000:]
    res = tmp_path / "results" / "wf"
    doc = json.loads((res / "tuning" / "mpich.json").read_text())
    assert "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE" in doc["env"]
    assert all(p.startswith(str(res / "tuning" / "mpich")) for p in doc["files"])
    env_text = (res / "tuning" / "mpich.env").read_text()
    assert "export MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=" in env_text
    decisions = pd.read_csv(res / "tuning" / "decisions.csv")
    assert set(decisions["size"]) == {8, 65536} and decisions.reason.notna().all()

    ver = json.loads((res / "tuning" / "verify-mpich.json").read_text())
    pts = {(e["size"], e["held_out"]): e for e in ver["entries"]}
    assert set(pts) == {(8, False), (728, True), (65536, False)}  # 728 B: sqrt(8 * 64 KiB) in doubles
    for e in pts.values():
        assert len(e["auto_means"]) == 2 and len(e["tuned_means"]) == 2  # A T .. T A
        assert e["verdict"] in ("tuned faster", "AUTO faster", "tie", "oversubscribed")
    # the tuned launches ran with the library's file, the AUTO launches without it
    runs = [json.loads(p.read_text()) for p in (res / "tuning" / "verify" / "runs").glob("*.json")]
    runs = [r for r in runs if r["launch"] < 600]  # the first pass (a second one cuts a rule)
    tuned = [r for r in runs if r["cells"][0]["cell"]["algorithm"] == "native:tuned"]
    bests = {e["best"] for e in pts.values()} - {"", "native:auto"}
    assert len(runs) == 4 + 2 * len(bests)
    assert tuned and all(r["provenance"]["env"].get("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE")
                         for r in tuned)
    md = (res / "tables" / "tuned.md").read_text()
    assert "728B (held out)" in md, md
    assert (tmp_path / "figures" / "wf" / "tuned_mpich.png").stat().st_size > 0
    assert "tuned" in (res / "report" / "index.html").read_text()

    # one cell with the campaign's tuning, outside the workflow
    import subprocess
    run = subprocess.run(HARNESS + ["run", "--library", "mpich", "--algorithm", "native:tuned",
                                    "--param", "tuning=wf", "--procs", "2", "--size", "64KiB",
                                    "--min-reps", "3", "--max-reps", "6", "--precision", "0.5"],
                         env=env_for(tmp_path), capture_output=True, text=True, timeout=300,
                         cwd=REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    missing = subprocess.run(HARNESS + ["run", "--library", "mpich", "--algorithm", "native:tuned",
                                        "--param", "tuning=nowhere", "--procs", "2"],
                             env=env_for(tmp_path), capture_output=True, text=True, timeout=300,
                             cwd=REPO)
    assert missing.returncode == 2 and "harness tune nowhere" in missing.stderr, missing.stderr
