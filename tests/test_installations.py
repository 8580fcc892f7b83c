"""Library installations of the user's choosing, with Debian's Open MPI 4.1 and MPICH 4.0 as
the "site" libraries beside the wheels (installed by .ci/debian-mpi.sh in CI): two
installations of one family in one campaign, a catalogue read from the library, and every bad
declaration refused before anything is launched."""

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import HARNESS, REPO
from test_workflow import SNAKEMAKE, env_for

from harness import libraries

DEB = Path("/usr/lib/x86_64-linux-gnu")
OMPI41 = {"family": "openmpi", "launcher": ["/usr/bin/mpiexec.openmpi", "--oversubscribe", "-n",
                                            "{procs}"], "libmpi": str(DEB / "libmpi.so.40")}
MPICH40 = {"family": "mpich", "launcher": ["/usr/bin/mpiexec.mpich", "-n", "{procs}"],
           "libmpi": str(DEB / "libmpich.so.12")}
STOP = {"min_reps": 3, "max_reps": 6, "precision": 0.5, "warmup": 1, "time_budget": "5s"}

pytestmark = pytest.mark.skipif(
    not (Path(OMPI41["launcher"][0]).exists() and Path(MPICH40["launcher"][0]).exists()),
    reason="Debian's openmpi-bin and mpich are not installed (bash .ci/debian-mpi.sh)")


def write(tmp_path, experiments, libraries, **top):
    doc = {"campaign": "site", "stopping": STOP, "confirm": {"enabled": False},
           "libraries": libraries, "experiments": experiments, **top}
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def harness(tmp_path, *args):
    """The command's CompletedProcess and what it launched: the launches that took their turn
    (harness/turns.py, traced through HARNESS_LAUNCH_TRACE)."""
    env = env_for(tmp_path)
    assert env.get("HARNESS_LAUNCH_LOCK")  # set by conftest.py: every launch takes a turn
    trace = tmp_path / "launches.jsonl"
    trace.unlink(missing_ok=True)
    env["HARNESS_LAUNCH_TRACE"] = str(trace)
    out = subprocess.run(HARNESS + [str(a) for a in args], capture_output=True, text=True,
                         timeout=300, env=env, cwd=REPO)
    launched = [json.loads(line)["what"] for line in trace.read_text().splitlines()] \
        if trace.exists() else []
    return out, launched


def test_two_open_mpi_versions_and_debian_mpich_in_one_campaign(tmp_path):
    """Open MPI 4.1.4 (Debian) beside the 5.0.11 wheel, distinct ids, both versions in the
    AUTO-vs-BEST table; Debian's MPICH 4.0.2 forced to an algorithm it has."""
    cfg = write(tmp_path, {
        "versions": {"libraries": ["openmpi", "ompi41"], "algorithms": ["native:auto"],
                     "procs": [2], "sizes": ["8B", "64KiB"]},
        "old_mpich": {"libraries": ["mpich40"], "algorithms": ["native:recursive_doubling"],
                      "procs": [2], "sizes": ["8B"]}},
        {"ompi41": OMPI41, "mpich40": MPICH40})
    target = tmp_path / "results" / "site" / "tables" / "auto_vs_best.md"
    choices = tmp_path / "results" / "site" / "tables" / "auto_choices.md"
    out = subprocess.run(SNAKEMAKE + [str(target), str(choices), "--snakefile", str(REPO / "Snakefile"),
                                      "--directory", str(tmp_path / "work"), "--configfile", str(cfg)],
                         env=env_for(tmp_path), capture_output=True, text=True, timeout=600,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    res = tmp_path / "results" / "site"
    df = pd.read_csv(res / "summary.csv")
    assert len(df) == 5 and df.cell_id.is_unique and df.run_id.nunique() == 3
    assert set(df.status) <= {"ok", "not-converged"}, df[["library", "status", "error"]]
    versions = df.groupby("library").library_version.first()
    assert versions["ompi41"].startswith("Open MPI v4.1.4")
    assert versions["openmpi"].startswith("Open MPI v5.0")
    assert versions["mpich40"] == "MPICH Version: 4.0.2"
    # the two Open MPI installations: same cells but for the library, different ids
    pairs = df[df.library != "mpich40"].groupby("size").cell_id.nunique()
    assert (pairs == 2).all()
    table = (res / "tables" / "auto_vs_best.md").read_text()
    assert "| ompi41 (Open MPI 4.1.4) | 2 | 8B |" in table
    # what AUTO ran, seen under gdb in each installation (the auto_ran stage)
    auto = df[df.algorithm == "native:auto"]
    forcible = set(libraries.catalogue()["openmpi"].algorithms)
    assert len(auto) == 4 and set(auto.auto_ran) <= forcible, auto[["library", "size", "auto_ran"]]
    assert "| AUTO ran | BEST |" in table
    assert (res / "auto_ran" / "ompi41-p2-n1-float64-sum.json").is_file()
    picked = choices.read_text()
    assert "| Library | P | Size | AUTO ran | AUTO time | BEST | Gain |" in picked
    assert picked.count("| ompi41 (Open MPI 4.1.4) | 2 |") == 2
    assert (tmp_path / "figures" / "site" / "auto_choices.png").stat().st_size > 0
    assert "| Open MPI 5.0.11 | 2 | 64KiB |" in table
    # the pre-flight ran for each installation, before the runs, and says what it found
    pre = {p.stem: json.loads(p.read_text()) for p in (res / "installations").glob("*.json")
           if not p.name.endswith(".decl.json")}
    assert set(pre) == {"openmpi", "ompi41", "mpich40"}
    assert pre["mpich40"]["algorithms"] == ["nb", "smp", "recursive_doubling",
                                            "reduce_scatter_allgather"]
    assert pre["mpich40"]["launched"] and pre["mpich40"]["family"] == "mpich"
    run = json.loads(next((res / "runs").glob(f"{df[df.library == 'mpich40'].run_id.iloc[0]}.json"))
                     .read_text())
    env = run["provenance"]["env"]
    assert env["MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"] == "recursive_doubling"
    assert "MPIR_CVAR_ALLREDUCE_COMPOSITION" not in env  # MPICH 4.0.2 has no such variable


def test_an_algorithm_the_installation_lacks_is_refused_at_plan_time(tmp_path):
    cfg = write(tmp_path, {"e": {"libraries": ["mpich40"], "algorithms": ["native:ring"],
                                 "procs": [2], "sizes": ["8B"]}}, {"mpich40": MPICH40})
    out, _ = harness(tmp_path, "plan", "--config", cfg)
    assert out.returncode == 2
    assert ("experiments.e.algorithms[0]: 'native:ring' matches no algorithm of mpich40 (the "
            "library, MPICH Version: 4.0.2, does not have it); valid: native:auto, native:nb, "
            "native:smp, native:recursive_doubling, native:reduce_scatter_allgather,") in out.stderr
    listing, _ = harness(tmp_path, "algorithms", "--config", cfg, "--library", "mpich40")
    assert listing.returncode == 0
    assert ("  lacks (in the mpich catalogue, not in this library): recursive_multiplying, tree, "
            "recexch, ring, k_reduce_scatter_allgather") in listing.stdout.splitlines()


BAD = {
    "wrong family": ({**OMPI41, "family": "mpich"},
                     "libraries.bad.family: declared 'mpich', but the library loaded "),
    "failing setup line": ({**MPICH40, "setup": ["true", "module load nonexistent"]},
                           "libraries.bad.setup[1]: 'module load nonexistent' failed (exit 127)"),
    "missing launcher": ({**MPICH40, "launcher": ["/opt/none/mpiexec", "-n", "{procs}"]},
                         "libraries.bad.launcher[0]: '/opt/none/mpiexec': no such executable file"),
    "missing libmpi": ({**MPICH40, "libmpi": "/opt/none/libmpi.so.12"},
                       "libraries.bad.libmpi: '/opt/none/libmpi.so.12': no such file"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_declaration_is_refused_with_one_line_before_any_launch(tmp_path, case):
    site, message = BAD[case]
    cfg = write(tmp_path, {"e": {"libraries": ["bad"], "algorithms": ["native:auto"],
                                 "procs": [2], "sizes": ["8B"]}}, {"bad": site})
    out, launched = harness(tmp_path, "run", "--config", cfg, "--library", "bad", "--procs", 2,
                            "--size", "8B", "--campaign", "refused")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert not (tmp_path / "results" / "refused").exists()  # nothing launched, nothing written
    assert launched == []  # refused before anything took its turn to launch
    doctor, _ = harness(tmp_path, "doctor", "--config", cfg, "--library", "bad")
    assert doctor.returncode == 2 and message in doctor.stdout
    wf = subprocess.run(SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory",
                                     str(tmp_path / "work"), "--configfile", str(cfg)],
                        env=env_for(tmp_path), capture_output=True, text=True, timeout=300,
                        cwd=REPO)
    assert wf.returncode != 0 and message in wf.stdout + wf.stderr
    assert not (tmp_path / "results" / "site" / "runs").exists()  # no run was launched


def test_harness_run_measures_the_declared_installation(tmp_path):
    cfg = write(tmp_path, {"e": {"libraries": ["ompi41"], "algorithms": ["native:auto"],
                                 "procs": [2], "sizes": ["8B"]}}, {"ompi41": OMPI41})
    out, launched = harness(tmp_path, "run", "--config", cfg, "--library", "ompi41", "--procs", 2,
                            "--size", "1KiB", "--algorithm", "native:ring", "--max-reps", 20,
                            "--time-budget", "2s", "--campaign", "adhoc")
    assert out.returncode == 0, out.stdout + out.stderr
    # the run's launch is traced: what the refused declarations show none of
    assert any(what.startswith("run r") for what in launched), launched
    df = pd.read_csv(tmp_path / "results" / "adhoc" / "summary.csv")
    assert list(df.library) == ["ompi41"]
    assert df.library_version[0].startswith("Open MPI v4.1.4")
    run = json.loads(next((tmp_path / "results" / "adhoc" / "runs").glob("*.json")).read_text())
    assert run["provenance"]["family"] == "openmpi"
    assert run["provenance"]["env"]["OMPI_MCA_coll_tuned_allreduce_algorithm"] == "4"
    unknown, _ = harness(tmp_path, "run", "--config", cfg, "--library", "ompi50", "--procs", 2)
    assert unknown.returncode == 2 and "argument --library: 'ompi50' is not declared in" in unknown.stderr


def test_the_catalogue_is_read_from_the_library_descriptions():
    """MPICH 4.0.2 joins its description's lines with nothing between them; the names are
    found among the catalogue's all the same, in the library's order."""
    env = {**os.environ, "MPI4PY_LIBMPI": str(DEB / "libmpich.so.12")}
    from harness import libraries

    lib = libraries.get_library("mpich40", MPICH40)
    env.update(lib.run_env())
    env["LD_LIBRARY_PATH"] = ":".join(lib.prepend()["LD_LIBRARY_PATH"])
    out = subprocess.run([str(Path(HARNESS[0]).parent / "python"), "-m", "harness.measure.identity"],
                         env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    ident = json.loads(out.stdout.split("harness-identity ", 1)[1])
    assert ident["found"] == {"auto": 0, "nb": 1, "smp": 2, "recursive_doubling": 3,
                              "reduce_scatter_allgather": 4}
    assert ident["missing_variables"] == ["MPIR_CVAR_ALLREDUCE_COMPOSITION"]
    assert ident["libmpi"].startswith(str(DEB / "libmpich.so.12"))
