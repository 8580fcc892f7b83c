"""What the Snakemake workflow calls: the checked config and its runs, rendering a run's job
script, and the fingerprint that tells Snakemake when a rendered run is out of date."""

from __future__ import annotations

import hashlib
import json

from .. import fileio, paths
from ..analysis.vocabulary import is_comparable
from ..results import outcome
from ..results import store as results
from . import config as _config
from . import auto_ran, plan, runner
from .confirm import groups


def simulation_memory_mb(procs: int, size: int) -> int:
    """Memory for a simulation of ``procs`` ranks at ``size`` bytes per rank: the simulating
    process (300 MB), each rank's actor (2 MB), and each rank's buffers and messages in flight
    (five copies of the size: measured at P = 16..256, docs/simulation.md), with a quarter
    more to spare."""
    return int(1.25 * (300 + procs * (2 + 5 * size / 2**20)))


class Campaign:
    """The config as Snakemake loaded it, checked and expanded into runs."""

    def __init__(self, doc: dict, source: str = "config"):
        self.cfg = _config.validate(doc, source=source)
        runs, unlaunched = plan.partition(self.cfg)
        self.runs = {r.run_id: r for r in runs}
        # cells outside their algorithm's condition: a run document each, no launch
        self.not_applicable = {n.run_id: n for n in unlaunched}
        self.store = results.CampaignStore(paths.results_root(), self.cfg.campaign)
        self.figures = paths.figures_root() / self.cfg.campaign
        self.cell_ids = ({c.cell_id for r in self.runs.values() for c in r.cells}
                         | {c.cell_id for n in unlaunched for c in n.run.cells})
        self.libraries = sorted({r.library for r in self.runs.values()})

    def auto_ran_groups(self) -> dict:
        """The groups of AUTO cells whose choice the ``auto_ran`` stage sees; none when
        ``auto_ran.enabled`` is false (``harness.campaign.auto_ran``)."""
        return auto_ran.groups(self.measured_runs()) if self.cfg.auto_ran else {}

    def installations(self) -> list[str]:
        """Every installation the campaign launches: its runs' and its SGD experiments'."""
        return sorted({r.library for r in self.measured_runs()}
                      | {e["library"] for e in (self.cfg.sgd or {}).values()})

    def declaration(self, library: str) -> dict:
        """What the pre-flight of ``library`` needs (``harness preflight``): its name, its
        declaration under ``libraries:`` (None: the wheel) and the config's ``launch``."""
        return {"name": library, "site": self.cfg.libraries.get(library),
                "launch": self.cfg.launch, "campaign": self.cfg.campaign}

    def write_declaration(self, library: str, path) -> None:
        fileio.write_json(path, self.declaration(library))

    def settings(self) -> dict:
        return dict(self.cfg.stopping)

    def record_not_applicable(self) -> list[str]:
        """Write the run document of every would-be run of not-applicable cells
        (``plan.NotApplicable``) that is not there as it should be; returns their run ids.
        Nothing is launched for them (rule aggregate, before the summary)."""
        experiments = self.experiments_of_cells()
        return [run_id for run_id, n in self.not_applicable.items()
                if results.write_not_applicable(self.store, {**results.not_applicable_doc(
                    run_id, self.cfg.campaign, n.run, n.reasons, self.settings(),
                    self.cfg.digest), "experiments": {
                        c.cell_id: experiments.get(c.cell_id, []) for c in n.run.cells}})]

    def say_outcome(self) -> None:
        """Print the campaign's last line (``harness.results.outcome``): its cells failed,
        timed out or wrong, from its summary when there is one (the Snakefile's onsuccess)."""
        said = outcome.of_store(self.store, self.cfg.allow_failures)
        if said:
            print(said[1], flush=True)

    def experiments_of_cells(self) -> dict[str, list[str]]:
        """cell id -> the names of the experiments that ask for it (a cell can serve several),
        sorted; expanded once per campaign object, recorded in each run's spec and each
        not-applicable run document."""
        if getattr(self, "_experiments", None) is not None:
            return self._experiments
        out: dict = {}
        for ex in self.cfg.experiments:
            sub = type(self.cfg)(**{**self.cfg.__dict__, "experiments": (ex,)})
            runs, unlaunched = plan.partition(sub)
            for r in runs + [n.run for n in unlaunched]:  # not-applicable cells too
                for c in r.cells:
                    out.setdefault(c.cell_id, []).append(ex.name)
        self._experiments = {k: sorted(set(v)) for k, v in out.items()}
        return self._experiments

    def fingerprint(self, run_id: str) -> str:
        """Changes when anything that shapes the run's measurement changes (not the commit)."""
        run = self.runs[run_id]
        lib = plan.library_for(self.cfg, run.library)
        blob = [run_id, self.settings(), self.cfg.seed, list(lib.launcher), list(lib.setup),
                lib.run_env(), list(self.cfg.plugins), self.platform(run)]
        return hashlib.sha1(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]

    def render(self, run_id: str) -> None:
        run = self.runs[run_id]
        lib = plan.library_for(self.cfg, run.library)
        script, spec = runner.prepare(run, lib, self.store, self.settings(), seed=self.cfg.seed,
                                      plugins=self.cfg.plugins, config_hash=self.cfg.digest,
                                      launches=int(self.cfg.stopping.get("launches", 1)),
                                      experiments=self.experiments_of_cells(),
                                      platform=self.platform(run))
        try:
            runner.write(self.store, script, spec)
        except OSError as exc:  # a full or read-only file system
            raise OSError(exc.errno, f"cannot write the job script of run {run_id} under "
                                     f"{self.store.dir / 'jobs'}: {exc.strerror}") from None

    def platform(self, run) -> dict | None:
        """A simulated run's platform, as its spec records it; None for a measured run."""
        simulated = self.cfg.simulated(run.library)
        return simulated.to_dict() if simulated else None

    def memory_mb(self, run) -> int:
        """The memory a simulated run asks of Slurm (``simulation_memory_mb``); 0 for a
        measured run: no ``--mem``, the site's default (profiles/slurm/config.yaml)."""
        if not run.platform:
            return 0
        return simulation_memory_mb(run.procs, max(c.size for c in run.cells))

    def measured_runs(self) -> list:
        """The runs that launch MPI: what the stages after the campaign (confirmation,
        tuning, what AUTO ran) launch again; a simulation is never confirmed or tuned."""
        return [r for r in self.runs.values() if not r.platform]

    def confirm_groups(self) -> dict:
        """Groups of the confirmation stage (``harness.campaign.confirm``), none when it is disabled."""

        return groups(self.measured_runs()) if self.cfg.confirm["enabled"] else {}

    def tune_libraries(self) -> list[str]:
        """Libraries the tuned-selection stage covers: AUTO and a forced algorithm measured
        without delay; none when ``tune.enabled`` is false."""
        if not self.cfg.tune["enabled"]:
            return []
        algs: dict[str, set] = {}
        for r in self.measured_runs():
            for c in r.cells:
                if is_comparable(c):
                    algs.setdefault(r.library, set()).add(c.algorithm)
        return sorted(lib for lib, a in algs.items() if "native:auto" in a and len(a) > 1)

    def walltime_minutes(self) -> int:
        return max(1, int(self.cfg.run_walltime // 60) + 2)
