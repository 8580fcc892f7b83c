"""``harness tune adaptive <c> --budget N``: a tuning from a fraction of the measurements.

The exhaustive campaign measures every forced algorithm at every point. This driver plans the
same candidate cells from a config (``candidates``: every ``native:*`` algorithm, AUTO
included, at every planned point without delay), then measures them in rounds, per library:

1. the seed cells of the adaptive policy (``harness.analysis.policies.adaptive``: every algorithm
   at the corners of the grid), ``batch`` at a time;
2. then, each round, the surrogate (``surrogate``: the forest or the Gaussian process of
   ``harness.analysis.forecast.SURROGATES``) fitted on the cells measured so far predicts the
   winner at every point and its regret; the next batch is chosen where the winner is least
   certain (``policies.adaptive``);
3. a library stops when the stopping rule holds (``regret.stop``: the predicted regret averaged
   over the points is below 5 % with 95 % confidence) after two rounds in a row
   (``regret.STOP_ROUNDS``; ``regret.fired`` in the replays) or its budget (cells per library,
   or a share of each library's cells such as ``25%``) is spent;
4. the closing round (unless ``close=False``) measures AUTO and the predicted winner wherever
   either is missing, so that every rule of the tuning file stands on measured evidence;
5. the summary of the measured cells is written and turned into the tuning files by
   ``harness.campaign.tune.tune``, exactly as ``harness tune <c>`` does.

Each round is measured through the same job scripts as any campaign: the driver writes a round
config (``results/<c>/adaptive/round-<k>.yaml``: the source config with one experiment per
library, algorithm and P, holding the chosen sizes; the cells keep their ids) and runs
Snakemake on it with the campaign's name (``--profile slurm`` passed through), so results land
in the campaign's store. ``results/<c>/adaptive/rounds.jsonl`` records every round when it is
chosen (round, the surrogate, per library the cells chosen, the cells measured before it, the
predicted regret and its q95). Resume: rerunning the same command first measures again every
recorded round whose runs (every launch of ``stopping.launches``) are not all in run documents
(Snakemake and the runs' journals skip what was measured), then continues; a cell with a run
document is never chosen again.
"""

from __future__ import annotations

import fcntl
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .. import fileio, paths
from ..analysis import forecast, policies, regret
from ..analysis.vocabulary import AUTO, is_comparable, timed_mask
from ..analysis.surrogate import TREES, verdict
from ..errors import ConfigError, TuneError
from ..results import store as results
from ..results.launches import repetitions
from ..results.view import statistic_view
from . import config as _config
from . import plan, tune

ROUND_KEYS = ["round", "closing", "libraries", "made"]


def candidates(cfg) -> pd.DataFrame:
    """Every native allreduce cell of ``cfg`` without delay (AUTO and the forced algorithms,
    not the selectors): one row per cell with its point, algorithm, dtype, id and experiment."""
    rows = []
    for ex in cfg.experiments:
        sub = type(cfg)(**{**cfg.__dict__, "experiments": (ex,)})
        for run in plan.expand(sub):
            for c in run.cells:
                if not is_comparable(c):
                    continue
                rows.append({"library": c.library, "procs": c.procs, "nodes": c.nodes,
                             "size": c.size, "dtype": c.dtype, "algorithm": c.algorithm,
                             "cell_id": c.cell_id, "experiment": ex.name, "cell": c})
    frame = pd.DataFrame(rows, columns=["library", *regret.CANDIDATE_COLUMNS, "cell_id",
                                        "experiment", "cell"])
    frame = frame.drop_duplicates("cell_id").reset_index(drop=True)
    if frame.empty:
        raise TuneError(f"{cfg.source}: no native:* cell without delay to tune from; expected "
                        f"an experiment with native:auto and forced native:* algorithms")
    for library, cells in frame.groupby("library"):
        n = cells["algorithm"].nunique()
        if n < 2:
            raise TuneError(f"{cfg.source}: library {library} has {n} native algorithm "
                            f"({cells['algorithm'].iloc[0]}), expected at least 2 to choose "
                            f"between (native:auto and a forced native:*)")
        repeated = cells[cells.duplicated(regret.CELL, keep=False)]
        if len(repeated):
            raise TuneError(f"{cfg.source}: library {library} has {len(repeated)} cells sharing "
                            f"a point and algorithm under different conditions (dtype, op, "
                            f"timing, buffers or params), e.g. "
                            f"{tuple(repeated.iloc[0][regret.CELL])}; expected one condition "
                            f"per library for an adaptive tuning")
    return frame


def parse_budget(value) -> int | float:
    """A budget: an integer >= 1 (cells per library) or a share of each library's cells as
    ``"25%"`` (a float in (0, 1]); TuneError naming what was found otherwise."""
    text = str(value).strip()
    if isinstance(value, str) and text.endswith("%"):
        try:
            share = float(text[:-1]) / 100
        except ValueError:
            share = math.nan
        if 0 < share <= 1:
            return share
    elif not isinstance(value, bool):
        try:
            return regret.whole(int(text) if isinstance(value, str) else value, "budget")
        except ValueError:
            pass
    raise TuneError(f"budget: got {value!r}, expected cells per library (an integer >= 1) or a "
                    f"share of each library's cells such as 25%")


class Driver:
    """The adaptive tuning of ``campaign`` over the candidate cells of the config at
    ``configfile``; ``budget`` and ``batch`` are cells per library (``batch`` per round)."""

    def __init__(self, configfile, campaign: str, budget: int, batch: int,
                 profile: str | None = None, trees: int = TREES, close: bool = True,
                 log=print, snakemake_args=(), surrogate: str = forecast.DEFAULT_SURROGATE):
        self.source = Path(configfile)
        self.cfg = _config.load(self.source)
        with open(self.source) as fh:
            self.raw = yaml.safe_load(fh)
        self.campaign = campaign
        self.statistic = (self.cfg.report or {}).get("statistic", "mean")  # what a time is
        self.budget = parse_budget(budget)
        self.batch = regret.whole(batch, "batch")
        self.profile, self.trees, self.close, self.log = profile, trees, close, log
        self.surrogate = forecast.checked_surrogate(surrogate)
        self.snakemake_args = list(snakemake_args)
        self.store = results.CampaignStore(paths.results_root(), campaign)
        self.dir = self.store.dir / "adaptive"
        try:
            self.cells = candidates(self.cfg)
        except ConfigError as exc:
            raise TuneError(str(exc)) from None
        self.by_id = self.cells.set_index("cell_id")
        largest = getattr(forecast.SURROGATES[self.surrogate], "MAX_CELLS", math.inf)
        for library in sorted(self.cells["library"].unique()):
            if min(self.budget_of(library), int((self.cells["library"] == library).sum())) > largest:
                raise TuneError(f"surrogate {self.surrogate}: library {library} may measure "
                                f"{self.budget_of(library)} cells, expected at most {largest} "
                                f"(its fit grows as the cube of the cells); lower --budget or "
                                f"use --surrogate forest")

    def budget_of(self, library: str) -> int:
        """The cells ``library`` may measure: the budget, or its share of the library's cells."""
        if isinstance(self.budget, int):
            return self.budget
        return max(1, math.ceil(self.budget * int((self.cells["library"] == library).sum())))

    # ------------------------------------------------------------------ state on disk
    @property
    def rounds_path(self) -> Path:
        return self.dir / "rounds.jsonl"

    def rounds(self) -> list[dict]:
        """The recorded rounds (a torn last line, from a kill while writing, is dropped)."""
        if not self.rounds_path.is_file():
            return []
        out = []
        for line in self.rounds_path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                break
        return out

    def record(self, doc: dict) -> None:
        lines = [json.dumps(r, sort_keys=True) for r in self.rounds()] + [
            json.dumps(doc, sort_keys=True)]
        fileio.atomic_write_text(self.rounds_path, "\n".join(lines) + "\n")

    def measured(self) -> pd.DataFrame:
        """The candidate cells that have a run document (any status), with their summary
        statistics (``n``: repetitions over all its launches; ``mean``: its time under the
        config's ``report.statistic``; ``status``)."""
        frame = results.summary_frame(self.store, keep=set(self.cells["cell_id"]))
        if frame.empty:
            return self.cells.iloc[:0].assign(n=[], mean=[], status=[])
        frame = statistic_view(frame, self.statistic).assign(n=repetitions(frame))
        stats = frame.set_index("cell_id")[["n", "mean", "status", "ci_low", "ci_high"]]
        out = self.cells[self.cells["cell_id"].isin(stats.index)].copy()
        return out.join(stats, on="cell_id")

    # ------------------------------------------------------------------ choosing
    def assess(self, library: str, done: pd.DataFrame) -> dict:
        """The surrogate's verdict on ``library`` after the cells ``done``: predicted regret
        (mean over the points) and its q95, and whether a round is still due."""
        lib_cells = self.cells[self.cells["library"] == library]
        lib_done = done[done["library"] == library]
        timed = lib_done[timed_mask(lib_done)]
        out = {"measured": int(len(lib_done)), "timed": int(len(timed)),
               "predicted_regret": None, "predicted_regret_q95": None}
        seeds = policies.seed_cells(lib_cells, lib_cells)
        seeded = seeds["cell_id"].isin(lib_done["cell_id"]).all()
        if len(timed) and seeded:
            # the choices: every cell measured with a time, or not measured yet
            usable = lib_cells[~lib_cells["cell_id"].isin(lib_done["cell_id"])
                               | lib_cells["cell_id"].isin(timed["cell_id"])]
            algorithms = sorted(set(usable["algorithm"]))
            _, times = forecast.forecast(timed[regret.MEASURED_COLUMNS], usable, algorithms,
                                         self.trees, surrogate=self.surrogate)
            said = verdict(times)
            out["predicted_regret"] = float(said.regret.mean())
            out["predicted_regret_q95"] = said.mean_regret_upper()
        out["rule_holds"] = out["predicted_regret_q95"] is not None and regret.stop(out)
        held = [r["libraries"][library].get("rule_holds", False) for r in self.rounds()
                if not r.get("closing") and library in r["libraries"]]
        out["stopped"] = ("stopping rule" if out["rule_holds"] and len(held) >= regret.STOP_ROUNDS - 1
                          and all(held[len(held) - regret.STOP_ROUNDS + 1:]) else
                          "budget spent" if len(lib_done) >= self.budget_of(library) else
                          "every cell measured" if len(lib_done) >= len(lib_cells) else "")
        return out

    def choose(self, library: str, done: pd.DataFrame, round_no: int) -> pd.DataFrame:
        """The next batch of ``library``: ``policies.adaptive`` on its open cells."""
        lib_cells = self.cells[self.cells["library"] == library]
        lib_done = done[done["library"] == library]
        open_cells = lib_cells[~lib_cells["cell_id"].isin(lib_done["cell_id"])]
        open_cells = open_cells.set_index("cell_id", drop=False)
        timed = lib_done[timed_mask(lib_done)]
        want = min(self.batch, self.budget_of(library) - len(lib_done), len(open_cells))
        rng = np.random.default_rng([self.cfg.seed, round_no])
        chosen = policies.adaptive(open_cells[regret.CANDIDATE_COLUMNS],
                                   timed[regret.MEASURED_COLUMNS], rng, want, trees=self.trees,
                                   surrogate=self.surrogate)
        return open_cells.loc[chosen.index[:want]]

    def closing(self, library: str, done: pd.DataFrame) -> pd.DataFrame:
        """AUTO and the predicted winner at every point where either is not measured."""
        lib_cells = self.cells[self.cells["library"] == library]
        lib_done = done[done["library"] == library]
        timed = lib_done[timed_mask(lib_done)]
        usable = lib_cells[~lib_cells["cell_id"].isin(lib_done["cell_id"])
                           | lib_cells["cell_id"].isin(timed["cell_id"])]
        if timed.empty or usable.empty:
            return lib_cells.iloc[:0]
        algorithms = sorted(set(usable["algorithm"]))
        points, times = forecast.forecast(timed[regret.MEASURED_COLUMNS], usable, algorithms,
                                          self.trees, surrogate=self.surrogate)
        winners = np.array(algorithms)[verdict(times).winner]
        want = set()
        for point, winner in zip(points[regret.POINT].itertuples(index=False, name=None), winners):
            want |= {(*point, winner), (*point, AUTO)}
        keys = lib_cells[regret.CELL].itertuples(index=False, name=None)
        pick = [k in want for k in keys]
        return lib_cells[pick & ~lib_cells["cell_id"].isin(lib_done["cell_id"]).to_numpy()]

    # ------------------------------------------------------------------ measuring
    def round_config(self, cell_ids) -> dict:
        """The source config with one experiment per (experiment, library, algorithm, P)
        holding the chosen sizes: the chosen cells, with their ids, and nothing else."""
        doc = {k: v for k, v in self.raw.items() if k not in ("experiments", "sgd", "tune",
                                                                "confirm", "plugins")}
        doc.update(campaign=self.campaign, confirm={"enabled": False}, tune={"enabled": False},
                   plugins=list(self.cfg.plugins))
        chosen = self.by_id.loc[list(cell_ids)]
        experiments = {}
        for (name, library, algorithm, procs), group in chosen.groupby(
                ["experiment", "library", "algorithm", "procs"], sort=True):
            cell = group["cell"].iloc[0]
            entry = {k: v for k, v in self.raw["experiments"][name].items()
                     if k not in ("workload", "enabled", "params")}
            entry.update(libraries=[library], algorithms=[algorithm], procs=[int(procs)],
                         sizes=sorted(int(s) for s in group["size"]), dtypes=[cell.dtype],
                         ops=[cell.op], delays=["none"], max_delays=[0])
            if cell.params:
                entry["params"] = {k: list(v) if isinstance(v, tuple) else v
                                   for k, v in cell.params}
            label = f"{name}-{library}-{algorithm.split(':', 1)[1]}-p{int(procs)}"
            experiments[label.replace("_", "-")] = entry
        doc["experiments"] = experiments
        return doc

    def planned_runs(self, doc: dict) -> list:
        """The runs (every launch of ``stopping.launches``) that measure a round's cells."""
        wanted = [c for lib in doc["libraries"].values() for c in lib["cells"]]
        if not wanted:
            return []
        path = self.dir / f"round-{doc['round']}.yaml"
        check = _config.validate(self.round_config(wanted), source=str(path))
        runs = plan.expand(check)
        planned = {c.cell_id for r in runs for c in r.cells}
        if planned != set(wanted):
            raise TuneError(f"{path}: the round config plans {len(planned)} cells, expected the "
                            f"{len(wanted)} chosen ones (a cell's id changed)")
        return runs

    def unfinished(self, doc: dict) -> int:
        """How many of a round's runs have no run document (a launch cut short)."""
        return sum(not (self.store.dir / "runs" / f"{r.run_id}.json").is_file()
                   for r in self.planned_runs(doc))

    def measure(self, doc: dict) -> None:
        """Write the round's config and run Snakemake on it up to the summary."""
        k = doc["round"]
        wanted = [c for lib in doc["libraries"].values() for c in lib["cells"]]
        if not wanted:
            return
        config_doc = self.round_config(wanted)
        path = self.dir / f"round-{k}.yaml"
        fileio.atomic_write_text(path, yaml.safe_dump(config_doc, sort_keys=False))
        self.planned_runs(doc)  # the round config plans exactly the chosen cells
        snakemake = Path(sys.executable).parent / "snakemake"
        cmd = [str(snakemake), "--snakefile", str(paths.REPO_ROOT / "Snakefile"),
               "--directory", str(self.dir / "work"), "--configfile", str(path.resolve()),
               "--nolock"]
        if self.profile:
            cmd += ["--profile", profile_path(self.profile)]
        cmd += [*self.snakemake_args, str(self.store.summary)]
        self.log(f"round {k}: measuring {len(wanted)} cells: $ {' '.join(cmd)}")
        code = subprocess.call(cmd, cwd=paths.REPO_ROOT)
        if code:
            raise TuneError(f"round {k}: snakemake exited with {code} (config {path}); "
                            f"rerun the same command to resume")

    # ------------------------------------------------------------------ the loop
    def run(self) -> dict:
        """Rounds until every library stopped, the closing round, the summary and the tuning
        files; returns ``tune.tune``'s documents."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "driver.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise TuneError(f"campaign {self.campaign}: another adaptive tuning holds "
                                f"{self.dir / 'driver.lock'}; wait for it to end") from None
            return self.loop()

    def loop(self) -> dict:
        recorded = self.rounds()
        for doc in recorded:  # every launch of every round, before anything is chosen from them
            missing = self.unfinished(doc)
            if missing:
                self.log(f"resuming round {doc['round']}: {missing} of its runs (launches) have "
                         f"no run document yet")
                self.measure(doc)
        if recorded and recorded[-1].get("closing"):
            return self.finish()
        libraries = sorted(self.cells["library"].unique())
        while True:
            done = self.measured()
            k = len(self.rounds()) + 1
            doc = {"round": k, "closing": False, "made": results.now(),
                   "surrogate": self.surrogate, "libraries": {}}
            for library in libraries:
                said = self.assess(library, done)
                chosen = [] if said["stopped"] else list(self.choose(library, done, k)["cell_id"])
                doc["libraries"][library] = {**said, "cells": chosen,
                                             "chosen": self.describe(chosen)}
                self.log(f"round {k}: {library}: {said['measured']} measured, predicted regret "
                         f"q95 {fmt(said['predicted_regret_q95'])}, "
                         + (f"stopped ({said['stopped']})" if said["stopped"]
                            else f"{len(chosen)} cells chosen"))
            if not any(v["cells"] for v in doc["libraries"].values()):
                break
            self.record(doc)
            self.measure(doc)
        if self.close:
            done = self.measured()
            doc = {"round": k, "closing": True, "made": results.now(),
                   "surrogate": self.surrogate, "libraries": {}}
            for library in libraries:
                chosen = list(self.closing(library, done)["cell_id"])
                doc["libraries"][library] = {"measured": int((done["library"] == library).sum()),
                                             "cells": chosen, "chosen": self.describe(chosen)}
            self.log(f"round {k} (closing): AUTO and the predicted winner where missing: "
                     + ", ".join(f"{lib} {len(v['cells'])}" for lib, v in doc["libraries"].items()))
            self.record(doc)
            self.measure(doc)
        return self.finish()

    def describe(self, cell_ids) -> list:
        rows = self.by_id.loc[list(cell_ids)] if len(cell_ids) else self.by_id.iloc[:0]
        return [[int(r.procs), int(r.nodes), int(r.size), r.algorithm]
                for r in rows.itertuples()]

    def finish(self) -> dict:
        """The summary of every measured candidate cell, then ``harness tune``'s files."""
        frame = self.measured()
        runs = {p.stem for p in (self.store.dir / "runs").glob("*.json")}
        results.rebuild_summary(self.store, keep=set(frame["cell_id"]), runs=runs)
        total = len(self.cells)
        for library, group in frame.groupby("library"):
            n = int((self.cells["library"] == library).sum())
            self.log(f"{library}: {len(group)} of {n} cells measured ({len(group) / n:.0%})")
        self.log(f"all: {len(frame)} of {total} cells; summary {self.store.summary}")
        return tune.tune(paths.results_root(), self.campaign, log=self.log,
                         statistic=self.statistic)


def fmt(x) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def profile_path(profile: str) -> str:
    """A profile name as Snakemake, started in the repository, finds it: a directory that
    exists as given (absolute), else ``profiles/<name>`` of the repository, else unchanged."""
    given = Path(profile)
    if given.is_dir():
        return str(given.resolve())
    shipped = paths.REPO_ROOT / "profiles" / profile
    return str(shipped) if shipped.is_dir() else profile
