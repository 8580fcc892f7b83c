"""The SGD stage of a campaign (config key ``sgd:``, docs/sgd.md): the order of the executions,
each execution's spec and job script (``<launcher> python -m harness.measure.sgd <spec>``,
from ``slurm_templates/run.sh.j2``), and one execution run with a wall-time limit.

``python -m harness.campaign.sgd_stage --execute <spec.json> [--timeout S]`` is what the workflow's
rule ``sgd_train`` runs: the job script of that spec with a wall-time limit, checking that the
execution wrote its document.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from .. import fileio
from ..measure.sgd import WRONG
from ..turns import launch_turn
from .plan import library_for
from .runner import git_commit, job_script


def launch_order(exp: dict) -> list[tuple[str, int]]:
    """(algorithm, execution index) in the order the executions run: the algorithms
    interleaved, every other round reversed (ring slt prr prr slt ring ring ...), so that no
    algorithm always runs first or last (drift on the machine spreads over all of them)."""
    order = []
    for k in range(exp["executions"]):
        algs = list(exp["algorithms"])
        order += [(a, k) for a in (algs if k % 2 == 0 else algs[::-1])]
    return order


def execution_name(algorithm: str, k: int) -> str:
    return f"{algorithm}-{k}"


def write_launch(cfg, name: str, algorithm: str, k: int, res_dir) -> tuple[Path, Path]:
    """Write the spec (``jobs/<alg>-<k>.json``) and job script (``jobs/<alg>-<k>.sh``) of one
    execution of experiment ``name`` under ``<res_dir>/sgd/<name>/``; returns both paths."""
    exp = cfg.sgd[name]
    base = Path(res_dir) / "sgd" / name
    stem = execution_name(algorithm, k)
    spec_path, script_path = base / "jobs" / f"{stem}.json", base / "jobs" / f"{stem}.sh"
    lib = library_for(cfg, exp["library"])
    spec = {
        "kind": "sgd", "campaign": cfg.campaign, "experiment": name, "algorithm": algorithm,
        "execution": k, "library": exp["library"], "procs": exp["procs"], "nodes": exp["nodes"],
        "experiment_settings": {k2: v for k2, v in exp.items() if k2 != "enabled"},
        "output": str(base / f"{stem}.json"), "jobscript": str(script_path),
        "git_commit": git_commit(), "config_hash": cfg.digest,
        "plugins": [str(x) for x in cfg.plugins],
    }
    script = job_script(
        lib, exp["procs"], exp["nodes"], lib.run_env(), "harness.measure.sgd", spec_path,
        title=(f"SGD execution {stem} of experiment {name} in campaign {cfg.campaign}: library "
               f"{exp['library']}, P={exp['procs']} (harness/measure/sgd.py)."),
        rerun="the workflow's rule sgd_train runs it (harness.campaign.sgd_stage --execute)")
    fileio.write_json(spec_path, spec)
    fileio.atomic_write_text(script_path, script)
    script_path.chmod(0o755)
    return spec_path, script_path


def execute(spec_path, timeout: float | None = None) -> int:
    """Run the job script of one execution with a wall-time limit; 0 when it wrote its
    document. The launch runs in its own process group, killed whole past the limit."""
    spec = fileio.read_json(spec_path)
    out = Path(spec["output"])
    if out.exists():
        out.unlink()  # a document from an earlier attempt must not pass for this one
    name = f"{spec['experiment']} {execution_name(spec['algorithm'], spec['execution'])}"
    with launch_turn(f"harness.campaign.sgd_stage: {name}"):
        proc = subprocess.Popen(["bash", spec["jobscript"]], start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as exc:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            if isinstance(exc, KeyboardInterrupt):
                raise
            print(f"harness.campaign.sgd_stage: {name}: past its wall-time limit of {timeout:g} s; killed",
                  file=sys.stderr)
            return 124
    if rc != 0:
        what = "its parameters were wrong" if rc == WRONG else f"the launch exited with status {rc}"
        print(f"harness.campaign.sgd_stage: {name}: {what}", file=sys.stderr)
        return rc
    if not out.is_file():
        print(f"harness.campaign.sgd_stage: the launch exited 0 but wrote no {out}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.campaign.sgd_stage", description=__doc__.split("\n")[0])
    ap.add_argument("--execute", metavar="SPEC", required=True,
                    help="run the job script of this execution's spec (results/<c>/sgd/<experiment>/jobs/*.json)")
    ap.add_argument("--timeout", type=float, default=None, help="wall-time limit (s)")
    args = ap.parse_args(argv)
    return execute(args.execute, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
