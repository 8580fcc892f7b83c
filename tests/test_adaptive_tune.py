"""The adaptive tuning driver (harness/campaign/adaptive.py, `harness tune adaptive <c>`).

The first tests run the driver's loop with the measurement replaced by a look-up in a model
(pure Python): rounds, the budget, the stopping rule, the closing round, resume. The last one
measures for real (MPICH, P = 2, five sizes, two algorithms, fast stopping rules): the rounds
go through Snakemake and the job scripts, the driver is interrupted after its first round,
rerun, and continues without measuring any cell twice."""

import json
import math
import os
import signal
import subprocess
import time

import pandas as pd
import pytest
import yaml
from conftest import HARNESS, REPO
from test_workflow import FAST_STOP, _ctrl_c_as_in_a_terminal, env_for

from harness.campaign import adaptive, plan
from harness.campaign import config as cfgmod
from harness.errors import TuneError

SIZES = [2**k for k in range(3, 21)]  # 8 B .. 1 MiB: 18 sizes
ALGORITHMS = ["native:auto", "native:recursive_doubling", "native:ring"]


def write(tmp_path, name="ad", sizes=SIZES, algorithms=ALGORITHMS, procs=(2,), **top):
    doc = {"campaign": name, "stopping": FAST_STOP, "confirm": {"enabled": False},
           "auto_ran": {"enabled": False},
           "experiments": {"sweep": {"libraries": ["mpich"], "algorithms": algorithms,
                                     "procs": list(procs), "sizes": sizes,
                                     "dtypes": ["float32"]}}, **top}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def model(algorithm: str, procs: int, size: int) -> float:
    """A time per call: recursive doubling wins small messages, the ring large ones; AUTO
    switches late (5 % slower than the best around the switch)."""
    rd = 3e-6 + 1.0e-9 * size
    ring = 12e-6 + 0.4e-9 * size
    return {"native:recursive_doubling": rd, "native:ring": ring,
            "native:auto": (rd if size < 2**16 else ring) * 1.05}[algorithm]


class Fake:
    """The measurement replaced by the model: ``measure`` records the cells of a round as
    measured and leaves an (empty) run document per launch (``interrupt_after``: rounds
    measured before a KeyboardInterrupt; ``cut_short``: the round whose launches after the
    first are killed, e.g. with its Slurm allocation)."""

    def __init__(self, interrupt_after=None, cut_short=None):
        self.done: dict = {}
        self.measured_rounds: list = []
        self.interrupt_after = interrupt_after
        self.cut_short = cut_short

    def install(self, monkeypatch):
        fake = self

        def measure(driver, doc):
            if fake.interrupt_after is not None and len(fake.measured_rounds) >= fake.interrupt_after:
                raise KeyboardInterrupt(f"test interrupt before measuring round {doc['round']}")
            ids = [c for lib in doc["libraries"].values() for c in lib["cells"]]
            again = doc["round"] in fake.measured_rounds  # resumed: its missing launches only
            assert again or not set(ids) & set(fake.done), "a cell measured twice"
            fake.measured_rounds.append(doc["round"])
            for cid in ids:
                r = driver.by_id.loc[cid]
                fake.done[cid] = model(r.algorithm, r.procs, r.size)
            (driver.store.dir / "runs").mkdir(parents=True, exist_ok=True)
            for run in driver.planned_runs(doc):
                if fake.cut_short == doc["round"] and run.launch > 0:
                    continue
                (driver.store.dir / "runs" / f"{run.run_id}.json").touch()
            if fake.cut_short == doc["round"]:
                fake.cut_short = None
                raise KeyboardInterrupt(f"test interrupt: round {doc['round']}'s later launches "
                                        f"cut short")

        def measured(driver):
            rows = driver.cells[driver.cells["cell_id"].isin(fake.done)].copy()
            return rows.assign(n=10, mean=rows["cell_id"].map(fake.done), status="ok",
                               ci_low=math.nan, ci_high=math.nan)

        monkeypatch.setattr(adaptive.Driver, "measure", measure)
        monkeypatch.setattr(adaptive.Driver, "measured", measured)
        monkeypatch.setattr(adaptive.Driver, "finish", lambda driver: {})
        return self


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


def test_candidates_are_the_native_cells_and_a_round_config_plans_exactly_the_chosen(tmp_path,
                                                                                    results):
    path = write(tmp_path, algorithms=["native:*"], sizes=["8B", "1KiB", "1MiB"])
    cfg = cfgmod.load(path)
    cells = adaptive.candidates(cfg)
    planned = {c.cell_id for r in plan.expand(cfg) for c in r.cells}
    assert set(cells["cell_id"]) == planned and len(cells) == 3 * 10  # MPICH: AUTO + 9 forced
    driver = adaptive.Driver(path, "elsewhere", budget=5, batch=2, log=lambda _: None)
    chosen = list(cells["cell_id"].iloc[[0, 4, 7, 20]])
    doc = driver.round_config(chosen)
    assert doc["campaign"] == "elsewhere" and doc["confirm"] == {"enabled": False}
    again = cfgmod.validate(doc)
    assert {c.cell_id for r in plan.expand(again) for c in r.cells} == set(chosen)
    assert driver.budget_of("mpich") == 5
    share = adaptive.Driver(path, "elsewhere", budget="25%", batch=2, log=lambda _: None)
    assert share.budget_of("mpich") == 8  # a quarter of 30 cells, rounded up
    for bad in (0, "0%", "101%", "x", True):
        with pytest.raises(TuneError, match=f"budget: got {bad!r}, expected cells per library"):
            adaptive.parse_budget(bad)
    one = write(tmp_path, name="one", algorithms=["native:auto", "ring"])
    with pytest.raises(TuneError, match=r"library mpich has 1 native algorithm \(native:auto\), "
                                        r"expected at least 2"):
        adaptive.candidates(cfgmod.load(one))


def test_rounds_seed_then_choose_stop_within_the_budget_and_close(tmp_path, results,
                                                                 monkeypatch):
    fake = Fake().install(monkeypatch)
    path = write(tmp_path)
    lines = []
    driver = adaptive.Driver(path, "ad", budget=30, batch=6, trees=20, log=lines.append)
    driver.run()
    rounds = driver.rounds()
    assert [r["round"] for r in rounds] == list(range(1, len(rounds) + 1))
    assert fake.measured_rounds == [r["round"] for r in rounds]
    first = rounds[0]["libraries"]["mpich"]
    # round 1: seed cells (every algorithm at the smallest, middle and largest size)
    assert {tuple(c) for c in first["chosen"]} <= {(2, 1, s, a) for s in (8, 2**12, 2**20)
                                                  for a in ALGORITHMS}
    assert first["measured"] == 0 and first["predicted_regret_q95"] is None
    regular = [r for r in rounds if not r["closing"]]
    chosen = [c for r in regular for c in r["libraries"]["mpich"]["cells"]]
    assert len(chosen) == len(set(chosen)) <= 30  # never twice, never past the budget
    assert all(len(r["libraries"]["mpich"]["cells"]) <= 6 for r in regular)
    later = [r["libraries"]["mpich"] for r in regular[2:]]
    assert all(r["predicted_regret_q95"] is not None for r in later)
    assert rounds[-1]["closing"]
    # the closing round leaves AUTO and the predicted winner measured at every point
    done = set(fake.done)
    cells = driver.cells
    for size in SIZES:
        at = cells[cells["size"] == size]
        assert at.loc[at["algorithm"] == "native:auto", "cell_id"].iloc[0] in done, size
        assert at["cell_id"].isin(done).sum() >= 2, size
    assert len(done) < len(cells)  # not everything: the point of it
    assert any("stopped (" in line for line in lines)


def test_an_interrupted_driver_resumes_from_its_rounds(tmp_path, results, monkeypatch):
    path = write(tmp_path)
    fake = Fake(interrupt_after=1).install(monkeypatch)
    driver = adaptive.Driver(path, "ad", budget=30, batch=6, trees=20, log=lambda _: None)
    with pytest.raises(KeyboardInterrupt, match=r"^test interrupt before measuring round 2$"):
        driver.run()
    assert [r["round"] for r in driver.rounds()] == [1, 2]  # round 2 chosen, not measured
    round2 = driver.rounds()[1]["libraries"]["mpich"]["cells"]
    fake.interrupt_after = None
    lines = []
    again = adaptive.Driver(path, "ad", budget=30, batch=6, trees=20, log=lines.append)
    again.run()
    runs = len(again.planned_runs(again.rounds()[1]))
    assert lines[0] == f"resuming round 2: {runs} of its runs (launches) have no run document yet"
    assert fake.measured_rounds[:2] == [1, 2] and set(round2) <= set(fake.done)
    numbers = [r["round"] for r in again.rounds()]
    assert numbers == list(range(1, len(numbers) + 1))


def test_a_round_whose_later_launches_were_cut_short_is_measured_again(tmp_path, results,
                                                                       monkeypatch):
    """stopping.launches 2: round 1's first launches finished, its second ones did not; every
    cell of it has a run document, yet the round is measured again before anything is chosen
    from it (a mean of one launch where the config asks for two)."""
    path = write(tmp_path, stopping={**FAST_STOP, "launches": 2})
    fake = Fake(cut_short=1).install(monkeypatch)
    driver = adaptive.Driver(path, "ad", budget=30, batch=6, trees=20, log=lambda _: None)
    with pytest.raises(KeyboardInterrupt, match=r"^test interrupt: round 1's later launches cut short$"):
        driver.run()
    first = driver.rounds()[0]
    runs = driver.planned_runs(first)
    assert {r.launch for r in runs} == {0, 1} and driver.unfinished(first) == len(runs) // 2
    lines = []
    again = adaptive.Driver(path, "ad", budget=30, batch=6, trees=20, log=lines.append)
    again.run()
    assert lines[0] == (f"resuming round 1: {len(runs) // 2} of its runs (launches) have no run "
                        f"document yet")
    assert fake.measured_rounds[:3] == [1, 1, 2] and again.unfinished(first) == 0


def test_the_gaussian_process_can_drive_the_rounds_and_each_round_names_its_surrogate(
        tmp_path, results, monkeypatch):
    fake = Fake().install(monkeypatch)
    path = write(tmp_path, tune={"surrogate": "gp"})
    seen = {}
    real = adaptive.Driver

    class Spy(real):  # what the command line builds from the config's tune.surrogate
        def __init__(self, *args, **kwargs):
            seen.update(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(adaptive, "Driver", Spy)
    from harness.cli import main
    assert main(["tune", "adaptive", "ad", "--budget", "30", "--batch", "6", "--trees", "20",
                 "--configfile", str(path)]) == 0
    assert seen["surrogate"] == "gp"
    rounds = [json.loads(line) for line in
              (results / "ad" / "adaptive" / "rounds.jsonl").read_text().splitlines()]
    assert {r["surrogate"] for r in rounds} == {"gp"} and rounds[-1]["closing"]
    chosen = [c for r in rounds if not r["closing"] for c in r["libraries"]["mpich"]["cells"]]
    assert len(chosen) == len(set(chosen)) <= 30 and set(chosen) <= set(fake.done)
    later = [r["libraries"]["mpich"] for r in rounds if not r["closing"]][2:]
    assert all(r["predicted_regret_q95"] is not None for r in later)
    # --surrogate wins over the config
    seen.clear()
    other = write(tmp_path, name="ad2", tune={"surrogate": "gp"})
    main(["tune", "adaptive", "ad2", "--budget", "6", "--batch", "6", "--trees", "10",
          "--surrogate", "forest", "--configfile", str(other)])
    assert seen["surrogate"] == "forest"


def test_bad_input_names_the_argument(tmp_path, results, capsys):
    from harness.cli import main

    path = write(tmp_path)

    def error(*argv):
        with pytest.raises(SystemExit, match=r"^2$") as exc:
            main(["tune", "adaptive", "ad", "--configfile", str(path), *argv])
        assert exc.value.code == 2
        return capsys.readouterr().err.strip()

    assert error().endswith("argument --budget: required: the cells per library to measure at "
                            f"most, or their share such as 25% (or tune.budget in {path})")
    for bad in ("0", "0%", "120%", "x%", "many"):
        assert error("--budget", bad).endswith(
            "argument --budget: expected a number of cells (an integer >= 1) or a share of each "
            f"library's cells such as 25%, got {bad!r}")
    assert "unrecognized arguments: --verify" in error("--budget", "3", "--verify")
    assert "argument --surrogate: invalid choice: 'tree'" in error("--budget", "3", "--surrogate",
                                                                    "tree")
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SystemExit, match=r"^2$"):
        main(["tune", "adaptive", "ad", "--budget", "3", "--configfile", str(missing)])
    assert f"argument --configfile: {missing}: no such config file" in capsys.readouterr().err
    adaptive_cfg = write(tmp_path, name="mode", tune={"mode": "adaptive", "budget": 4})
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "snakemake"), "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(tmp_path / "work"), "--configfile", str(adaptive_cfg), "-n"],
        env=env_for(tmp_path), capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode != 0
    assert "tune.mode is adaptive: run `harness tune adaptive mode" in out.stdout + out.stderr


def run_docs(root):
    """cell id -> the run documents that hold it."""
    out: dict = {}
    for p in (root / "ad" / "runs").glob("*.json"):
        for c in json.loads(p.read_text())["cells"]:
            out.setdefault(c["cell_id"], []).append(p.stem)
    return out


@pytest.mark.timeout(1200)
def test_adaptive_tuning_measures_in_rounds_resumes_after_an_interrupt_and_tunes(tmp_path):
    path = write(tmp_path, sizes=["64B", "1KiB", "16KiB", "256KiB", "1MiB"],
                 algorithms=["native:auto", "native:ring"])
    root = tmp_path / "results"
    rounds = root / "ad" / "adaptive" / "rounds.jsonl"
    cmd = HARNESS + ["tune", "adaptive", "ad", "--budget", "8", "--batch", "3",
                     "--trees", "20", "--configfile", str(path)]
    log_path = tmp_path / "first.log"
    with open(log_path, "w") as log_fh:
        proc = subprocess.Popen(cmd, env=env_for(tmp_path), stdout=log_fh,
                                stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
                                preexec_fn=_ctrl_c_as_in_a_terminal)
    deadline = time.time() + 600
    # round 2 is recorded once round 1 is measured: interrupt the driver then
    while time.time() < deadline and proc.poll() is None and (
            not rounds.is_file() or len(rounds.read_text().splitlines()) < 2):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
    proc.wait(timeout=120)
    first = [json.loads(line) for line in rounds.read_text().splitlines()]
    assert [r["round"] for r in first] == [1, 2], log_path.read_text()[-3000:]
    measured_first = run_docs(root)
    assert set(first[0]["libraries"]["mpich"]["cells"]) <= set(measured_first)

    out = subprocess.run(cmd, env=env_for(tmp_path), capture_output=True, text=True,
                         timeout=900, cwd=REPO)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    after = [json.loads(line) for line in rounds.read_text().splitlines()]
    assert after[:2] == first  # the rounds continue, the recorded ones untouched
    assert [r["round"] for r in after] == list(range(1, len(after) + 1)) and after[-1]["closing"]
    chosen = [c for r in after for c in r["libraries"]["mpich"]["cells"]]
    assert len(chosen) == len(set(chosen))
    docs = run_docs(root)
    assert set(docs) == set(chosen)  # every chosen cell measured, nothing else
    assert all(len(v) == 1 for v in docs.values()), docs  # and none twice
    for cid, (run,) in docs.items():  # runs of the first attempt kept their cells
        if cid in measured_first:
            assert measured_first[cid] == [run]
    summary = pd.read_csv(root / "ad" / "summary.csv")
    assert set(summary["cell_id"]) == set(chosen)
    assert (root / "ad" / "tuning" / "mpich.json").is_file()
    assert (root / "ad" / "tuning" / "decisions.csv").is_file()
    assert "mpich:" in out.stdout and "-> " in out.stdout  # tune's line per library
