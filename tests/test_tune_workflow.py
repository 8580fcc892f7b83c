"""The tuned-selection stage in the workflow: `tune.enabled` makes the campaign write each
library's tuning files, verify AUTO against `native:tuned` in fresh interleaved launches at
the measured and held-out sizes, and report it; `harness run --algorithm native:tuned`
measures one cell with a campaign's tuning."""

import json

import pandas as pd
from conftest import HARNESS, REPO  # noqa: F401
from test_workflow import env_for, snakemake, write_config
from winners_support import algorithm_of, expected_verdict, means_by_cell, run_docs, set_winners


def test_campaign_tunes_verifies_and_reports(tmp_path):
    """The summary is set so that ring wins at 8 B and recursive doubling at 64 KiB (both
    far outside each other's intervals): the tuning replaces AUTO at both, and the
    verification measures A T RD RING RING RD T A."""
    cfg = write_config(tmp_path, {
        "n": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring",
                                                     "native:recursive_doubling"],
              "procs": [2], "sizes": ["8B", "64KiB"]}},
        confirm={"enabled": False}, tune={"enabled": True, "rounds": 1})
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-4000:]
    res = tmp_path / "results" / "wf"
    set_winners(res, {("mpich", 8): "native:ring", ("mpich", 65536): "native:recursive_doubling"})
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-4000:]
    doc = json.loads((res / "tuning" / "mpich.json").read_text())
    assert "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE" in doc["env"]
    assert all(p.startswith(str(res / "tuning" / "mpich")) for p in doc["files"])
    assert (doc["replaced"], doc["kept_auto"]) == (2, 0)
    env_text = (res / "tuning" / "mpich.env").read_text()
    assert "export MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=" in env_text
    decisions = pd.read_csv(res / "tuning" / "decisions.csv").set_index("size")
    assert dict(decisions.algorithm) == {8: "ring", 65536: "recursive_doubling"}
    assert set(decisions.source) == {"campaign"} and set(decisions.verdict) == {"BEST faster"}

    ver = json.loads((res / "tuning" / "verify-mpich.json").read_text())
    first = ver.get("first_pass", ver["entries"])
    pts = {(e["size"], e["held_out"]): e for e in first}
    assert set(pts) == {(8, False), (728, True), (65536, False)}  # 728 B: sqrt(8 * 64 KiB) in doubles
    assert {k: e["best"] for k, e in pts.items()} == {
        (8, False): "native:ring", (728, True): "", (65536, False): "native:recursive_doubling"}
    assert pts[8, False]["expected"] == "ring"
    assert pts[65536, False]["expected"] == "recursive_doubling"
    assert pts[728, True]["expected"] == "recursive_doubling"  # above the boundary at 724 B
    runs = run_docs(res / "tuning" / "verify" / "runs")
    first_runs = [r for r in runs if r["launch"] < 600]
    assert [algorithm_of(r) for r in first_runs] == [
        "native:auto", "native:tuned", "native:recursive_doubling", "native:ring",
        "native:ring", "native:recursive_doubling", "native:tuned", "native:auto"]
    assert ver["launches"] == 8
    # AUTO and tuned at every point, each BEST at its own point only
    assert [sorted(c["cell"]["size"] for c in r["cells"]) for r in first_runs] == \
        [[8, 728, 65536]] * 2 + [[65536], [8], [8], [65536]] + [[8, 728, 65536]] * 2
    by_cell = {}
    for r in first_runs:
        for c in r["cells"]:
            st = c.get("stats") or {}
            ok = c["status"] in ("ok", "not-converged") and st.get("mean")
            by_cell.setdefault((c["cell"]["algorithm"], c["cell"]["size"]), []).append(
                float(st["mean"]) if ok else float("nan"))
    for (size, _), e in pts.items():
        assert e["auto_means"] == by_cell["native:auto", size]
        assert e["tuned_means"] == by_cell["native:tuned", size]
        assert len(e["auto_means"]) == 2 and len(e["tuned_means"]) == 2  # A T .. T A
        _, lo, hi, _ = expected_verdict(e["auto_means"], e["tuned_means"])
        assert e["verdict"] == ("tuned faster" if lo > 1 else "AUTO faster" if hi < 1 else "tie")
    # a held-out point where AUTO was faster cuts the rules and verifies again, once
    bad = [e for e in first if e["held_out"] and e["verdict"] == "AUTO faster"]
    assert len(runs) - len(first_runs) == (8 if bad else 0)
    assert ver["refined"] == [{"procs": 2, "size": e["size"]} for e in bad]
    # the tuned launches ran with the library's file, the AUTO and BEST launches without it
    key = "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE"
    assert [bool(r["provenance"]["env"].get(key)) for r in first_runs] == \
        [algorithm_of(r) == "native:tuned" for r in first_runs]
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


def test_open_mpi_and_intel_mpi_confirm_tune_and_verify(tmp_path):
    """The confirmation and the tuned-selection stages for Open MPI and Intel MPI: one size,
    AUTO and one forced algorithm each, the forced one set to win the campaign. Each library
    confirms with A B B A; its tuning follows the confirmation's verdict; the verification
    measures A T B B T A (Intel MPI: A T B U U B T A with its autotuner U)."""
    cfg = write_config(tmp_path, {
        "o": {"libraries": ["openmpi"], "algorithms": ["native:auto", "native:ring"],
              "procs": [2], "sizes": ["4KiB"]},
        "i": {"libraries": ["impi"], "algorithms": ["native:auto", "native:recursive_doubling"],
              "procs": [2], "sizes": ["4KiB"]}},
        confirm={"rounds": 1, "time_budget": "1s"}, tune={"enabled": True, "rounds": 1})
    out = snakemake(tmp_path, cfg, "--until", "aggregate")
    assert out.returncode == 0, out.stderr[-4000:]
    res = tmp_path / "results" / "wf"
    best = {"openmpi": "native:ring", "impi": "native:recursive_doubling"}
    set_winners(res, {(lib, 4096): alg for lib, alg in best.items()})
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-4000:]

    confirm_runs = run_docs(res / "confirm" / "runs")
    decisions = pd.read_csv(res / "tuning" / "decisions.csv").set_index("library")
    verify_runs = run_docs(res / "tuning" / "verify" / "runs")
    for lib, b in best.items():
        doc = json.loads((res / "confirm" / f"{lib}-p2-n1-single.json").read_text())
        mine = [r for r in confirm_runs if r["cells"][0]["cell"]["library"] == lib]
        assert [algorithm_of(r) for r in mine] == ["native:auto", b, b, "native:auto"]
        assert doc["launches"] == 4
        (e,) = doc["entries"]
        means = means_by_cell(mine)
        assert e["best"] == b and e["auto_means"] == means[e["auto_cell"]]
        assert e["best_means"] == means[e["best_cell"]] and len(e["best_means"]) == 2
        assert e["verdict"] == expected_verdict(e["auto_means"], e["best_means"])[3]

        # the tuning takes the confirmation's verdict: replaced only if BEST was faster
        d = decisions.loc[lib]
        assert (d.source, d.verdict) == ("confirmation", e["verdict"])
        assert (d.algorithm if isinstance(d.algorithm, str) else "") == (
            b.split(":", 1)[1] if e["verdict"] == "BEST faster" else "")
        tdoc = json.loads((res / "tuning" / f"{lib}.json").read_text())
        ver = json.loads((res / "tuning" / f"verify-{lib}.json").read_text())
        order = ["native:auto", "native:tuned", b] + (
            ["native:autotuner"] * 2 if lib == "impi" else []) + [b, "native:tuned", "native:auto"]
        mine = [r for r in verify_runs
                if r["cells"][0]["cell"]["library"] == lib and r["launch"] < 600]
        assert [algorithm_of(r) for r in mine] == order and ver["launches"] == len(order)
        (v,) = ver["entries"]  # one size: no held-out point, no second pass
        assert (v["size"], v["held_out"], v["best"]) == (4096, False, b)
        m = {a: [] for a in order}
        for r in mine:
            st = r["cells"][0].get("stats") or {}
            m[algorithm_of(r)].append(st.get("mean"))
        assert v["auto_means"] == m["native:auto"] and v["tuned_means"] == m["native:tuned"]
        assert v["best_means"] == m[b]
        # the tuned launches carry the library's tuning environment, the others none of its
        # variables that name a tuning file
        files = {k for k, val in tdoc["env"].items() if str(res / "tuning") in str(val)}
        for r in mine:
            env = r["provenance"]["env"]
            if algorithm_of(r) == "native:tuned":
                assert all(env.get(k) == str(val) for k, val in tdoc["env"].items()), env
            else:
                assert not files & set(env), env
    assert len(verify_runs) == 6 + 8
    assert len(confirm_runs) == 8
    table = pd.read_csv(res / "tables" / "tuned.csv")
    assert sorted(zip(table.library, table["size"], table.verdict)) == sorted(
        (lib, 4096, json.loads((res / "tuning" / f"verify-{lib}.json").read_text())
         ["entries"][0]["verdict"]) for lib in best)
    for lib in best:
        assert (tmp_path / "figures" / "wf" / f"tuned_{lib}.png").stat().st_size > 0
