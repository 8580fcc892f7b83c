import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HARNESS = [sys.executable, "-m", "harness.cli"]
PLUGIN = str(REPO / "tests" / "plugins" / "broken.py")
FAST = ["--min-reps", "3", "--max-reps", "6", "--warmup", "1", "--precision", "0.5"]


@pytest.fixture
def results_root(tmp_path, monkeypatch):
    root = tmp_path / "results"
    monkeypatch.setenv("HARNESS_RESULTS", str(root))
    return root


def harness(*args, timeout=600):
    """Run the ``harness`` command; returns the CompletedProcess (text)."""
    return subprocess.run(HARNESS + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy(), cwd=REPO)


def fast_settings(**over):
    s = {"confidence": 0.95, "precision": 0.5, "min_reps": 3, "max_reps": 6, "time_budget": 30.0,
         "warmup": 1, "base_compute": 0.0, "metric": "mean"}
    s.update(over)
    return s


def execute_run(results_root, library, cells, settings=None, campaign="t", plugins=(),
                timeout=300, algorithm_env=None):
    """Render, write and execute one run of ``cells`` through the same path as the workflow.
    Returns (outcome, run document, store)."""
    from harness import libraries, results, runner
    from harness.plan import Run

    lib = libraries.get_library(library)
    env = algorithm_env
    if env is None:
        alg = cells[0].algorithm
        env = lib.native(alg).env if alg.startswith("native:") else {}
    from harness.plan import THREAD_LEVELS, needed_thread_level

    level = max((max(c.thread_level, needed_thread_level(c.algorithm, c.params),
                     key=THREAD_LEVELS.index) for c in cells), key=THREAD_LEVELS.index)
    run = Run(library=library, env=tuple(sorted(env.items())), procs=cells[0].procs,
              nodes=1, cells=tuple(cells), thread_level=level)
    store = results.CampaignStore(results_root, campaign)
    script, spec = runner.prepare(run, lib, store, settings or fast_settings(), plugins=plugins)
    runner.write(store, script, spec)
    outcome = runner.execute(store, spec, timeout=timeout)
    doc = results.read_json(store.run_doc(run.run_id))
    return outcome, doc, store
